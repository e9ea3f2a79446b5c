#pragma once
// Scoring predictions (JSON Lines) with the official metrics, so predictions made by any
// engine can be scored and compared with the reference implementations.
//
// One JSON object per line; blank lines are skipped.
//   LongBench: "dataset", "pred", "answers" (list of strings), "all_classes" (list of
//              strings, or null / absent for datasets other than trec and lsht)
//   RULER:     "task" (one of the 13 synthetic.yaml tasks), "pred", "outputs" (list)
//   NIAH:      "pred", "needle", and optionally "length" and "depth" (numbers) to score
//              the depth × length cells apart
// The official prediction files name the dataset or task in the file name instead of a
// field: RULER's pred/<task>.jsonl and LongBench's pred/<model>/<dataset>.jsonl. A line
// without the field takes its file's default group (the file name, or --task).
//
// Rows: lines that name their method (`deferkv eval`'s samples.jsonl: "label", e.g.
// "snapkv@64") are scored apart per label, and RULER lines of such a file also per
// "length" (the sweep's target length), as eval's summary tables are; lines without a
// label form one row. Scores of different methods are never pooled.
//
// Bad input (invalid JSON, a missing or mistyped field, an unknown dataset or task) is
// an Error naming the source, the line number and the problem.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

enum class Benchmark { kLongBench, kRuler, kNiah };

// "longbench", "ruler", "niah", and back (unknown: an error).
std::string_view benchmark_name(Benchmark benchmark);
Benchmark benchmark_from_name(std::string_view name);

struct GroupScore {
  std::string name;  // LongBench dataset, RULER task, or NIAH cell ("length=L,depth=D" or "all")
  size_t samples;
  double score;  // 0..100, rounded to 2 decimals
};

// One method's scores (one row of the papers' tables).
struct MethodScores {
  std::string label;              // "snapkv@64"; "" for lines that name no method
  std::optional<int64_t> length;  // RULER rows of a sweep file: the target length
  // LongBench datasets in eval.py's order, RULER tasks in synthetic.yaml's order, NIAH
  // cells by length, then depth.
  std::vector<GroupScore> groups;
  double average;  // unweighted mean of the group scores, rounded to 2 decimals
};

struct PredictionScores {
  Benchmark benchmark;
  std::vector<MethodScores> rows;  // labels in the order they first appear, then lengths ascending
};

// A predictions text and what to call it: `name` in error messages, `default_group` for
// lines that carry no dataset / task field ("" for none).
struct PredictionSource {
  std::string text;
  std::string name;
  std::string default_group;
};

// `benchmark` unset: taken from the first line's fields ("dataset": LongBench, "task":
// RULER, "needle": NIAH) or, for a line without them, from its default group's name.
PredictionScores score_predictions(const std::vector<PredictionSource>& sources,
                                   std::optional<Benchmark> benchmark);
PredictionScores score_predictions(std::string_view jsonl, std::string_view source,
                                   std::optional<Benchmark> benchmark);

// A predictions file, or a folder of them (its *.jsonl files, each file's stem its
// default group). `task` non-empty: the default group of every file instead.
PredictionScores score_predictions_path(const std::string& path, std::optional<Benchmark> benchmark,
                                        const std::string& task = "");

}  // namespace deferkv::eval
