#pragma once
// Runs one evaluation sample on the model: a fresh Session sized to the prompt and its
// generation, the method's press, the prompt fed question-aware or question-agnostic
// (deferkv::prefill_prompt, split where TaskSample::context_tokens says), the decode loop
// with the task's stops, and what the run cost (timings, KV bytes after eviction and at peak).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "deferkv/eval_sweep.h"
#include "deferkv/model.h"
#include "deferkv/sampler.h"
#include "deferkv/session.h"
#include "engine/kept_set_recorder.h"

namespace deferkv {
class ThreadPool;
}

namespace deferkv::eval {

// The seed a sample decodes with: made from the run's seed and the sample (task, length,
// and its number or NIAH depth), so any subset of rows decodes as the whole sweep would.
uint64_t sample_seed_of(uint64_t run_seed, const TaskSample& sample);

class SampleRunner {
 public:
  // sampling.seed is the run's seed; each sample draws with a seed made from it and the
  // sample, so a resumed run decodes the rest as a fresh one would.
  // draft: the draft model for presses that draft (may be null). `options` gives each
  // sample's session its batch size and cache types (n_ctx is the sample's). Warnings
  // go to `warnings` (may be null).
  SampleRunner(std::shared_ptr<const Model> model, std::shared_ptr<const Model> draft, std::shared_ptr<ThreadPool> pool,
               SamplerParams sampling, SessionOptions options, bool question_agnostic, std::FILE* warnings,
               TurnMode turn_mode = TurnMode::kIndependent);

  // kept: when given, follows the run's kept set (for the kept-token map).
  // A sample with turns (TaskSample::turns) runs them all through one CompressedContext.
  SampleRun operator()(const SweepMethod& method, const TaskSample& sample, KeptSetRecorder* kept = nullptr) const;

 private:
  SampleRun run_turns(const SweepMethod& method, const TaskSample& sample) const;

  std::shared_ptr<const Model> model_, draft_;
  std::shared_ptr<ThreadPool> pool_;
  SamplerParams sampling_;
  SessionOptions options_;
  bool question_agnostic_;
  std::FILE* warnings_;
  mutable std::set<std::string> warned_;  // rows (label@length) warned of keeping whole prompts
  TurnMode turn_mode_;
};

}  // namespace deferkv::eval
