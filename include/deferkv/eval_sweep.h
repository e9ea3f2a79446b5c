#pragma once
// An evaluation sweep: methods × budgets × tasks × lengths (× samples for RULER, × depths
// for NIAH), or methods × budgets × LongBench datasets × rows. Its results folder holds the
// rows of one context (everything in config.json but the grid, config["sweep"]), one JSON
// line per row as soon as it is done, so a rerun, a grown sweep (more samples, another press,
// budget, task or length) or another shard skips the rows already there. Running a sample on
// a model is the caller's (deferkv eval builds a Session for it); this side generates the
// samples, scores the predictions, keeps the logs, splits shards, merges them and writes the
// reports.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
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
  // The press's full parameter string (every default spelled out) @ the budget: a row's
  // method in its identity, so "deferkv" and "deferkv:d=1" share rows when they are the same
  // press, and a changed default never reuses rows computed under the old one. A press that
  // cannot be built with this budget has its label (its rows fail, see run_sweep).
  std::string identity() const;
  // Why the press cannot be built with this budget (make_press's error); unset when it can.
  std::optional<std::string> build_error() const;
};

// Fails, with make_press's error, when a press of `methods` cannot be built with any of its
// budgets: a mistake to fix before anything runs. A press that only some budgets cannot
// build gives failed rows (run_sweep).
void check_presses_can_run(const std::vector<SweepMethod>& methods);

struct SweepPlan {
  Benchmark benchmark = Benchmark::kRuler;
  std::vector<std::string> tasks;           // RULER tasks, LongBench datasets
  std::vector<int64_t> lengths;             // tokens (RULER, NIAH)
  std::vector<double> depths;               // NIAH depths, percent
  int64_t samples = 1;                      // RULER: per task and length; LongBench: per dataset, < 0 all
  std::vector<int64_t> rows;                // LongBench: the rows of each dataset (LongBenchSet::rows)
  std::vector<SweepMethod> methods;
};

// config["sweep"]: the plan's grid (tasks, lengths, depths, samples, rows, methods with their
// full parameter strings); plan_from_config reads it back (eval merge).
nlohmann::ordered_json sweep_config(const SweepPlan& plan);
SweepPlan plan_from_config(const nlohmann::ordered_json& config);

// Shard `index` of `count` (1-based): a deterministic, balanced slice of the flattened grid.
struct Shard {
  int64_t index = 1, count = 1;
  // "2/4"; anything else is an error naming the text.
  static Shard parse(const std::string& text);
  bool whole() const { return count == 1; }
  // The shard's samples file: samples.jsonl, or samples.shard-2-of-4.jsonl; with stem
  // "failures", its failed rows' file.
  std::string log_name(const std::string& stem = "samples") const;
};

// How the Q questions of a shared context are asked (eval --context-mode; issue 44): each
// alone after the context, or as a conversation where turn k also reads the earlier turns'
// questions and the model's own answers (appended uncompressed after the context).
enum class TurnMode { kIndependent, kMultiTurn };
TurnMode turn_mode_from_name(std::string_view name);  // "independent", "multi-turn"
const char* turn_mode_name(TurnMode mode);

// One question's answer in a sample of several (TaskSample::turns).
struct TurnRun {
  std::string prediction;
  int64_t generated_tokens = 0;
  std::string stop;
  // The ids read after the context (its question; in multi-turn the earlier turns' questions
  // and answers first) and the ids answered.
  std::vector<int32_t> read, answer;
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
  // A press's candidate pool (Press::candidate_pool: DeferKV's pool=P), entries per KV head;
  // unset without one.
  std::optional<int64_t> candidate_pool;
  // The process's peak resident memory when the sample ended (model and every sample so far
  // included; 0 when not known, as for a server's samples).
  int64_t peak_rss_bytes = 0;
  // A sample of Q > 1 questions: every turn's answer (prediction is turn 1's), and the
  // context's tokens not prefilled again for turns 2..Q: (Q - 1) × the context's tokens.
  std::vector<TurnRun> turns;
  int64_t prefill_tokens_saved = 0;
};

using SampleExecutor = std::function<SampleRun(const SweepMethod& method, const TaskSample& sample)>;

// A row's context: `config` without its grid (config["sweep"]) and the model's path (a moved
// model file is the same model: its sha256 stays). Every other field, present or added later,
// is part of every row's identity.
nlohmann::ordered_json row_context(const nlohmann::ordered_json& config);

// `parent`/`name`, or `parent`/`stem`-<first 8 hex digits of the sha256 of the row context>
// when `name` is empty, with `config` written to its config.json; `parent`/latest links to
// it. When the folder exists, its config.json must have the same row context (a rerun or a
// grown sweep reuses its rows); another context is an error naming the fields that differ,
// so rows are never mixed.
std::string prepare_results_dir(const std::string& parent, const std::string& name, const std::string& stem,
                                const nlohmann::ordered_json& config);

// Runs every row of the plan (of `shard`'s slice) not yet in any samples file of `dir`,
// appending it to the shard's own file as soon as it is scored (under an exclusive lock:
// another process appending to that file is an error naming it), and shows progress with
// an ETA on `progress`. A row whose run throws deferkv::Error (a budget below the press's
// window, a press that needs a draft model, ...) is a failed row: its fields and the error go
// to the shard's failures file (failures.jsonl, failures.shard-i-of-N.jsonl), the error is
// shown once per method and message, and the sweep goes on. A later run retries failed rows
// (they are not in a samples file). Returns how many samples it ran (failed ones included).
// With `concurrency` K > 1, K rows run at once, each on its own thread (`execute` must then
// be thread-safe; eval --server's is); an exception other than deferkv::Error stops the
// sweep after the rows in flight are logged, and is rethrown.
int64_t run_sweep(const SweepPlan& plan, const TaskGenerator& generator, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress, Shard shard = {}, int concurrency = 1);
// The same for a LongBench plan, every row of `set` (which applies the plan's sample limit).
int64_t run_sweep(const SweepPlan& plan, const LongBenchSet& set, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress, Shard shard = {}, int concurrency = 1);

// Joins the shards' results folders `dirs` into `out` (config.json, samples.jsonl) and
// returns the plan: every folder must hold the same configuration, and every row of the plan
// must be in exactly one of their samples files; otherwise an error names the folder or
// shard and the row. `out` must not hold results yet.
SweepPlan merge_results(const std::vector<std::string>& dirs, const std::string& out);

// summary.md and summary.json (methods as rows, tasks or datasets as columns, Avg.; cost per
// method), results.csv (tidy: one line per method, task and length), for NIAH a heat map per method (niah-<label>.svg), the cost bars
// (cost-bars.svg) and, when the plan has two budgets or more, score-vs-budget.svg; each SVG
// also as PNG when a converter is installed (see plots/png_export.h). From the plan's
// rows in `dir` (from all its samples files). summary.json records config.json and `run`
// (commit, threads, …).
// Rows that failed (run_sweep) and have not been done since are marked "failed" in the
// tables, with their count and error in every report.
// Returns the score and cost tables as Markdown, for printing.
std::string write_reports(const SweepPlan& plan, const std::string& dir, const nlohmann::ordered_json& run);

// The plan's rows in `dir` that failed and have not been done since: in the folder's failures
// files, or in `shard`'s own when it is one of several.
int64_t failed_rows(const SweepPlan& plan, const std::string& dir, Shard shard = {});

}  // namespace deferkv::eval
