#pragma once
// Scoring a predictions file (JSON Lines) with the official metrics, so predictions made
// by any engine can be scored and compared with the reference implementations.
//
// One JSON object per line; blank lines are skipped.
//   LongBench: "dataset", "pred", "answers" (list of strings), "all_classes" (list of
//              strings, or null / absent for datasets other than trec and lsht)
//   RULER:     "task" (one of the 13 synthetic.yaml tasks), "pred", "outputs" (list)
//   NIAH:      "pred", "needle", and optionally "length" and "depth" (numbers) to score
//              the depth × length cells apart
// Bad input (invalid JSON, a missing or mistyped field, an unknown dataset or task) is
// an Error naming the source, the line number and the problem.
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
  double score;  // 0..100 (NIAH 0..10), rounded to 2 decimals
};

struct PredictionScores {
  Benchmark benchmark;
  // LongBench datasets in eval.py's order, RULER tasks in synthetic.yaml's order, NIAH
  // cells by length, then depth.
  std::vector<GroupScore> groups;
  double average;  // unweighted mean of the group scores, rounded to 2 decimals
};

// `benchmark` unset: taken from the first line's fields ("dataset": LongBench, "task":
// RULER, "needle": NIAH). `source` names the text in error messages.
PredictionScores score_predictions(std::string_view jsonl, std::string_view source,
                                   std::optional<Benchmark> benchmark);

PredictionScores score_predictions_file(const std::string& path, std::optional<Benchmark> benchmark);

}  // namespace deferkv::eval
