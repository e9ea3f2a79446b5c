// The sweep loop: each sample is generated once and run with every method, scored with
// the official metric and logged at once.
#include <functional>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_sweep.h"
#include "eval/sweep/progress.h"
#include "eval/sweep/sample_log.h"

namespace deferkv::eval {
namespace {

// One (task, length, sample), (length, depth) or (dataset, row) of the plan, before any
// method runs it.
struct SampleSlot {
  std::string task;  // "niah" for NIAH, the dataset for LongBench
  int64_t length;    // RULER, NIAH
  int64_t index;     // RULER, LongBench
  double depth;      // NIAH
};

std::vector<SampleSlot> slots_of(const SweepPlan& plan) {
  std::vector<SampleSlot> slots;
  if (plan.benchmark == Benchmark::kNiah) {
    for (int64_t length : plan.lengths) {
      for (double depth : plan.depths) slots.push_back({"niah", length, 0, depth});
    }
    return slots;
  }
  for (const std::string& task : plan.tasks) {
    for (int64_t length : plan.lengths) {
      for (int64_t i = 0; i < plan.samples; ++i) slots.push_back({task, length, i, -1});
    }
  }
  return slots;
}

std::vector<SampleSlot> slots_of(const LongBenchSet& set) {
  std::vector<SampleSlot> slots;
  for (const std::string& dataset : set.datasets()) {
    for (int64_t i = 0; i < set.rows(dataset); ++i) slots.push_back({dataset, 0, i, -1});
  }
  return slots;
}

std::string key_of(const SweepPlan& plan, const SweepMethod& method, const SampleSlot& slot) {
  switch (plan.benchmark) {
    case Benchmark::kNiah: return SampleLog::niah_key(method.label(), slot.length, slot.depth);
    case Benchmark::kLongBench: return SampleLog::longbench_key(method.label(), slot.task, slot.index);
    case Benchmark::kRuler: break;
  }
  return SampleLog::ruler_key(method.label(), slot.task, slot.length, slot.index);
}

std::string slot_text(const SweepPlan& plan, const SweepMethod& method, const SampleSlot& slot) {
  switch (plan.benchmark) {
    case Benchmark::kNiah: return fmt::format("{} niah {} depth {}%", method.label(), slot.length, slot.depth);
    case Benchmark::kLongBench: return fmt::format("{} {} #{}", method.label(), slot.task, slot.index);
    case Benchmark::kRuler: break;
  }
  return fmt::format("{} {} {} #{}", method.label(), slot.task, slot.length, slot.index);
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

nlohmann::ordered_json record_of(const SweepPlan& plan, const SweepMethod& method, const TaskSample& sample,
                                 const SampleRun& run, double score) {
  nlohmann::ordered_json r;
  r["label"] = method.label();
  r["method"] = method.press;
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
  r["pred"] = run.prediction;
  r["score"] = score;
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
  return r;
}

}  // namespace

std::string SweepMethod::label() const { return budget ? press + "@" + budget_label : press; }

namespace {

// Runs every (slot, method) not yet in the log; make_sample builds a slot's sample once.
int64_t run_slots(const SweepPlan& plan, const std::vector<SampleSlot>& slots,
                  const std::function<TaskSample(const SampleSlot&)>& make_sample, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress_out) {
  SampleLog log(dir + "/samples.jsonl");
  int64_t done = 0;
  for (const SampleSlot& slot : slots) {
    for (const SweepMethod& method : plan.methods) done += log.contains(key_of(plan, method, slot));
  }
  const auto total = static_cast<int64_t>(slots.size() * plan.methods.size());
  Progress progress(progress_out, total, done);
  int64_t ran = 0;
  for (const SampleSlot& slot : slots) {
    std::optional<TaskSample> sample;  // made when a method still needs it
    for (const SweepMethod& method : plan.methods) {
      const std::string key = key_of(plan, method, slot);
      if (log.contains(key)) continue;
      if (!sample) sample = make_sample(slot);
      const SampleRun run = execute(method, *sample);
      const double score = score_of(plan.benchmark, *sample, run);
      log.append(key, record_of(plan, method, *sample, run, score));
      ++ran;
      // On the reports' scale: RULER and LongBench 0-100 (a sample's metric is 0-1), NIAH 0-10.
      progress.sample_done(slot_text(plan, method, slot), plan.benchmark == Benchmark::kNiah ? score : 100 * score);
    }
  }
  progress.finish();
  return ran;
}

}  // namespace

int64_t run_sweep(const SweepPlan& plan, const TaskGenerator& generator, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress) {
  if (plan.benchmark == Benchmark::kLongBench) fail("a LongBench sweep reads its samples from a LongBenchSet");
  return run_slots(
      plan, slots_of(plan),
      [&](const SampleSlot& slot) {
        return plan.benchmark == Benchmark::kNiah ? generator.niah(slot.length, slot.depth)
                                                  : generator.ruler(slot.task, slot.length, slot.index);
      },
      execute, dir, progress);
}

int64_t run_sweep(const SweepPlan& plan, const LongBenchSet& set, const SampleExecutor& execute,
                  const std::string& dir, std::FILE* progress) {
  if (plan.benchmark != Benchmark::kLongBench) fail("a LongBenchSet holds LongBench samples only");
  return run_slots(
      plan, slots_of(set), [&](const SampleSlot& slot) { return set.sample(slot.task, slot.index); }, execute, dir,
      progress);
}

}  // namespace deferkv::eval
