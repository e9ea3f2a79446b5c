#pragma once
// Runs one evaluation sample on the model: a fresh Session sized to the prompt and its
// generation, the method's press, the decode loop with the task's stops, and what the
// run cost (timings, KV bytes after eviction and at peak).
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "deferkv/eval_sweep.h"
#include "deferkv/model.h"
#include "deferkv/sampler.h"
#include "common_options.h"

namespace deferkv {
class ThreadPool;
}

namespace deferkv::cli {

// The seed a sample decodes with: made from the run's seed and the sample (task, length,
// and its number or NIAH depth), so any subset of rows decodes as the whole sweep would.
uint64_t sample_seed_of(uint64_t run_seed, const eval::TaskSample& sample);

class EvalSampleRunner {
 public:
  // sampling.seed is the run's seed; each sample draws with a seed made from it and the
  // sample, so a resumed run decodes the rest as a fresh one would.
  // draft: the draft model for presses that draft (may be null).
  EvalSampleRunner(std::shared_ptr<const Model> model, std::shared_ptr<const Model> draft,
                   std::shared_ptr<ThreadPool> pool, SamplerParams sampling, int64_t n_batch, CacheTypeOptions cache_types);

  eval::SampleRun operator()(const eval::SweepMethod& method, const eval::TaskSample& sample) const;

 private:
  std::shared_ptr<const Model> model_, draft_;
  std::shared_ptr<ThreadPool> pool_;
  SamplerParams sampling_;
  int64_t n_batch_;
  CacheTypeOptions cache_types_;
  mutable std::set<std::string> warned_;  // rows (label@length) warned of keeping whole prompts
};

}  // namespace deferkv::cli
