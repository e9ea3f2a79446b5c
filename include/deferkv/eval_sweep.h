#pragma once
// An evaluation sweep: methods × budgets × tasks × lengths (× samples for RULER, × depths
// for NIAH), or methods × budgets × LongBench datasets × rows, run in one results folder, one JSON line per sample as soon as it is done, so
// a rerun of the same configuration skips what is there and goes on. Running a sample on
// a model is the caller's (deferkv eval builds a Session for it); this side generates the
// samples, scores the predictions, keeps the log and writes the reports.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/eval_tasks.h"
#include "deferkv/press.h"
#include "deferkv/score_predictions.h"

namespace deferkv::eval {

class LongBenchSet;  // eval_longbench.h

// One row of the results: a press spec and its budget (none for "full").
struct SweepMethod {
  std::string press;               // "full", "snapkv", "deferkv:d=1,eta=0.7"
  std::optional<KvBudget> budget;  // unset for "full"
  std::string budget_label;        // how the budget was given: "64", "r0.5"; "" for "full"
  // "full", "snapkv@64", "snapkv@r0.5": the row's name in logs and reports.
  std::string label() const;
};

struct SweepPlan {
  Benchmark benchmark = Benchmark::kRuler;
  std::vector<std::string> tasks;           // RULER tasks, LongBench datasets
  std::vector<int64_t> lengths;             // tokens (RULER, NIAH)
  std::vector<double> depths;               // NIAH depths, percent
  int64_t samples = 1;                      // RULER: per task and length; LongBench: per dataset, < 0 all
  std::vector<SweepMethod> methods;
};

// What running one sample on the model gave.
struct SampleRun {
  std::string prediction;
  int64_t generated_tokens = 0;
  std::string stop;  // stop_reason_name(), or "newline"
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t decode_tokens = 0;
  double capture_seconds = 0;
  double eviction_seconds = 0;
  std::optional<int64_t> kv_bytes_after_eviction;  // unset when nothing was evicted
  int64_t peak_kv_bytes = 0;
};

using SampleExecutor = std::function<SampleRun(const SweepMethod& method, const TaskSample& sample)>;

// `parent`/`stem`-<first 8 hex digits of the sha256 of config>, created with config.json the
// first time. When the folder exists its config.json must be this one (a rerun resumes);
// anything else there is an error, so results are never overwritten.
std::string prepare_results_dir(const std::string& parent, const std::string& stem,
                                const nlohmann::ordered_json& config);

// Runs every sample of the plan not yet in `dir`/samples.jsonl, appending it there as
// soon as it is scored, and shows progress with an ETA on `progress`. Returns how many
// samples it ran.
int64_t run_sweep(const SweepPlan& plan, const TaskGenerator& generator, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress);
// The same for a LongBench plan, every row of `set` (which applies the plan's sample limit).
int64_t run_sweep(const SweepPlan& plan, const LongBenchSet& set, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress);

// summary.md and summary.json (methods as rows, tasks or datasets as columns, Avg.; cost per
// method), results.csv (tidy: one line per method, task and length), for NIAH a heat map per method (niah-<label>.svg), the cost bars
// (cost-bars.svg) and, when the plan has two budgets or more, score-vs-budget.svg; each SVG
// also as PNG when a converter is installed (see plots/png_export.h). From the plan's
// samples in `dir`. summary.json records config.json and `run` (commit, threads, …).
// Returns the score and cost tables as Markdown, for printing.
std::string write_reports(const SweepPlan& plan, const std::string& dir, const nlohmann::ordered_json& run);

}  // namespace deferkv::eval
