// The sweep loop: each sample is generated once and run with every method of the shard's
// slice that the folder does not hold yet, scored with the official metric and logged at once.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_sweep.h"
#include "eval/sweep/concurrent_jobs.h"
#include "eval/sweep/progress.h"
#include "eval/sweep/sample_log.h"
#include "eval/sweep/shards.h"
#include "eval/sweep/slots.h"

namespace deferkv::eval {
namespace {

std::vector<SampleSlot> longbench_slots(const LongBenchSet& set) {
  std::vector<SampleSlot> slots;
  for (const std::string& dataset : set.datasets()) {
    for (int64_t i = 0; i < set.rows(dataset); ++i) slots.push_back({dataset, 0, i, -1});
  }
  return slots;
}

double score_of(Benchmark benchmark, const TaskSample& sample, const SampleRun& run) {
  switch (benchmark) {
    case Benchmark::kNiah: return niah_score(run.prediction, sample.references.at(0));
    case Benchmark::kLongBench:
      return longbench_sample_score(sample.task, run.prediction, sample.references, sample.all_classes);
    case Benchmark::kRuler: break;
  }
  return ruler_sample_score(sample.task, run.prediction, sample.references);
}

// The fields that name a row (its method and sample) and those `deferkv score` reads.
nlohmann::ordered_json row_fields(const SweepPlan& plan, const SweepMethod& method, const TaskSample& sample) {
  nlohmann::ordered_json r;
  r["label"] = method.label();
  r["method"] = method.press;
  r["method_params"] = method.identity();
  r["budget"] = method.budget ? nlohmann::ordered_json(method.budget_label) : nlohmann::ordered_json(nullptr);
  if (plan.benchmark == Benchmark::kLongBench) {
    // The fields `deferkv score --benchmark longbench` reads, and the row's id.
    r["dataset"] = sample.task;
    r["index"] = sample.index;
    r["max_length"] = sample.target_length;
    r["answers"] = sample.references;
    r["all_classes"] = sample.all_classes;
  } else if (plan.benchmark == Benchmark::kNiah) {
    // The fields `deferkv score --benchmark niah` reads.
    r["length"] = sample.target_length;
    r["depth"] = sample.depth_percent;
    r["needle"] = sample.references.at(0);
  } else {
    // The fields `deferkv score --benchmark ruler` reads.
    r["task"] = sample.task;
    r["length"] = sample.target_length;
    r["index"] = sample.index;
    r["outputs"] = sample.references;
  }
  return r;
}

// A sample of several questions: each turn scored against its own references (only RULER
// tasks ask several). The row's score is their mean; turn_scores keeps each.
std::vector<double> turn_scores(const TaskSample& sample, const SampleRun& run) {
  if (run.turns.size() != sample.turns.size()) {
    fail("{} sample {}: {} answers for {} questions", sample.task, sample.index, run.turns.size(), sample.turns.size());
  }
  std::vector<double> scores;
  for (size_t k = 0; k < run.turns.size(); ++k) {
    scores.push_back(ruler_sample_score(sample.task, run.turns[k].prediction, sample.turns[k].references));
  }
  return scores;
}

nlohmann::ordered_json record_of(const SweepPlan& plan, const SweepMethod& method, const TaskSample& sample,
                                 const SampleRun& run, double score) {
  nlohmann::ordered_json r = row_fields(plan, method, sample);
  r["pred"] = run.prediction;
  r["score"] = score;
  if (!sample.turns.empty()) {
    nlohmann::ordered_json preds = nlohmann::ordered_json::array(), outputs = nlohmann::ordered_json::array();
    for (const TurnRun& turn : run.turns) preds.push_back(turn.prediction);
    for (const TaskTurn& turn : sample.turns) outputs.push_back(turn.references);
    r["turn_preds"] = preds;
    r["turn_outputs"] = outputs;
    r["turn_scores"] = turn_scores(sample, run);
    r["prefill_tokens_saved"] = run.prefill_tokens_saved;
  }
  r["prompt_tokens"] = sample.tokens.size();
  r["generated_tokens"] = run.generated_tokens;
  r["stop"] = run.stop;
  r["prefill_seconds"] = run.prefill_seconds;
  r["decode_tokens_per_second"] =
      run.decode_seconds > 0 ? static_cast<double>(run.decode_tokens) / run.decode_seconds : 0.0;
  r["capture_seconds"] = run.capture_seconds;
  r["eviction_seconds"] = run.eviction_seconds;
  r["kv_bytes_after_eviction"] =
      run.kv_bytes_after_eviction ? nlohmann::ordered_json(*run.kv_bytes_after_eviction) : nlohmann::ordered_json(nullptr);
  r["peak_kv_bytes"] = run.peak_kv_bytes;
  r["peak_rss_bytes"] = run.peak_rss_bytes;
  if (run.candidate_pool) r["candidate_pool"] = *run.candidate_pool;  // only a press with a pool
  return r;
}

}  // namespace

namespace {

// Every key in the folder's samples files.
std::set<std::string> keys_done(const std::string& dir) {
  std::set<std::string> keys;
  for (const std::string& file : SampleLog::files_in(dir)) {
    for (const nlohmann::json& record : SampleLog::read(file)) keys.insert(SampleLog::key_of(record));
  }
  return keys;
}

// Runs every (slot, method) of the shard's slice not yet in the folder, `concurrency` at a
// time; make_sample builds a slot's sample once.
int64_t run_slots(const SweepPlan& plan, const std::vector<SampleSlot>& slots,
                  const std::function<TaskSample(const SampleSlot&)>& make_sample, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress_out, Shard shard, int concurrency) {
  SampleLog log(dir + "/" + shard.log_name());  // locked first: the keys below are then not being written
  std::optional<SampleLog> failures;  // opened at the first failed row
  std::set<std::string> errors_shown;  // label and message
  const std::set<std::string> done_keys = keys_done(dir);
  std::vector<std::string> identities;
  for (const SweepMethod& method : plan.methods) identities.push_back(method.identity());
  std::vector<int64_t> costs;  // per row, slot-major as the loop below runs them
  for (const SampleSlot& slot : slots) costs.insert(costs.end(), plan.methods.size(), slot.length);
  const std::vector<int64_t> shard_of = shard_of_rows(costs, shard.count);

  struct PendingRow {
    size_t slot, method;
  };
  std::vector<PendingRow> pending;
  std::map<size_t, int64_t> rows_of_slot;  // pending rows per slot, to free its sample after the last
  int64_t total = 0;
  for (size_t row = 0; row < costs.size(); ++row) {
    if (shard_of[row] != shard.index) continue;
    ++total;
    const size_t s = row / plan.methods.size(), m = row % plan.methods.size();
    if (done_keys.contains(row_key(plan, identities[m], slots[s]))) continue;
    pending.push_back({s, m});
    ++rows_of_slot[s];
  }
  Progress progress(progress_out, total, total - static_cast<int64_t>(pending.size()));
  // Each slot's sample is made once, by the first of its rows to run, and shared by the
  // others (a slot's rows are consecutive, so few samples are alive at once).
  std::mutex samples_mutex, log_mutex;
  std::map<size_t, std::shared_ptr<const TaskSample>> samples;
  auto sample_of = [&](size_t s) {
    std::lock_guard lock(samples_mutex);
    auto& sample = samples[s];
    if (!sample) sample = std::make_shared<const TaskSample>(make_sample(slots[s]));
    return sample;
  };
  auto release = [&](size_t s) {
    std::lock_guard lock(samples_mutex);
    if (--rows_of_slot[s] == 0) samples.erase(s);
  };
  int64_t ran = 0;  // under log_mutex
  run_concurrently(pending.size(), concurrency, [&](size_t k) {
    const auto [s, m] = pending[k];
    const SweepMethod& method = plan.methods[m];
    const std::shared_ptr<const TaskSample> sample = sample_of(s);
    std::optional<SampleRun> run;
    try {
      run = execute(method, *sample);
    } catch (const Error& e) {
      // A failed row: recorded with its error, and the sweep goes on.
      std::lock_guard lock(log_mutex);
      nlohmann::ordered_json failed = row_fields(plan, method, *sample);
      failed["error"] = e.what();
      if (!failures) failures.emplace(dir + "/" + shard.log_name("failures"), RecordKind::kFailure);
      failures->append(failed);
      ++ran;
      progress.sample_failed(row_text(plan, method, slots[s]));
      if (errors_shown.insert(method.label() + "\n" + e.what()).second && progress_out != nullptr) {
        fmt::print(progress_out, "error: {}: {} (a failed row; the sweep goes on)\n", method.label(), e.what());
      }
      release(s);
      return;
    }
    double score = score_of(plan.benchmark, *sample, *run);
    if (!sample->turns.empty()) {
      const std::vector<double> scores = turn_scores(*sample, *run);
      score = 0;
      for (double s : scores) score += s / static_cast<double>(scores.size());
    }
    {
      std::lock_guard lock(log_mutex);
      log.append(record_of(plan, method, *sample, *run, score));
      ++ran;
      // On the reports' 0-100 scale (a sample's metric is 0-1, NIAH's 0-10).
      const double shown = plan.benchmark == Benchmark::kNiah ? niah_percent(score) : 100 * score;
      progress.sample_done(row_text(plan, method, slots[s]), shown);
    }
    release(s);
  });
  progress.finish();
  return ran;
}

}  // namespace

TurnMode turn_mode_from_name(std::string_view name) {
  if (name == "independent") return TurnMode::kIndependent;
  if (name == "multi-turn") return TurnMode::kMultiTurn;
  fail("unknown context mode '{}' (known: independent, multi-turn)", name);
}

const char* turn_mode_name(TurnMode mode) { return mode == TurnMode::kMultiTurn ? "multi-turn" : "independent"; }

int64_t run_sweep(const SweepPlan& plan, const TaskGenerator& generator, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress, Shard shard, int concurrency) {
  if (plan.benchmark == Benchmark::kLongBench) fail("a LongBench sweep reads its samples from a LongBenchSet");
  return run_slots(
      plan, slots_of(plan),
      [&](const SampleSlot& slot) {
        return plan.benchmark == Benchmark::kNiah ? generator.niah(slot.length, slot.depth)
                                                  : generator.ruler(slot.task, slot.length, slot.index);
      },
      execute, dir, progress, shard, concurrency);
}

int64_t run_sweep(const SweepPlan& plan, const LongBenchSet& set, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress, Shard shard, int concurrency) {
  if (plan.benchmark != Benchmark::kLongBench) fail("a LongBenchSet holds LongBench samples only");
  return run_slots(
      plan, longbench_slots(set), [&](const SampleSlot& slot) { return set.sample(slot.task, slot.index); }, execute,
      dir, progress, shard, concurrency);
}

}  // namespace deferkv::eval
