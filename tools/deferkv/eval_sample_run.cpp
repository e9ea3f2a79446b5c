#include "eval_sample_run.h"

#include <cmath>

#include <fmt/format.h>

#include "deferkv/generate.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/rng.h"
#include "run_stats.h"

namespace deferkv::cli {

uint64_t sample_seed_of(uint64_t run_seed, const eval::TaskSample& sample) {
  const int64_t which = sample.depth_percent >= 0 ? std::llround(sample.depth_percent * 1000) : sample.index;
  return eval::sample_seed(run_seed, sample.task, sample.target_length, which);
}

EvalSampleRunner::EvalSampleRunner(std::shared_ptr<const Model> model, std::shared_ptr<const Model> draft,
                                   std::shared_ptr<ThreadPool> pool, SamplerParams sampling, int64_t n_batch,
                                   CacheTypeOptions cache_types)
    : model_(std::move(model)), draft_(std::move(draft)), pool_(std::move(pool)), sampling_(sampling),
      n_batch_(n_batch), cache_types_(std::move(cache_types)) {}

eval::SampleRun EvalSampleRunner::operator()(const eval::SweepMethod& method, const eval::TaskSample& sample) const {
  SessionOptions options;
  options.n_ctx = static_cast<int64_t>(sample.tokens.size()) + sample.max_new_tokens;
  options.n_batch = n_batch_;
  cache_types_.apply(options);
  Session session(model_, pool_, options);
  if (draft_) session.set_draft_model(draft_);
  if (method.budget) {
    session.set_press(make_press(method.press, *method.budget));
    // Once per row and length: such a row equals the full cache.
    const std::string row = fmt::format("{}@{}", method.label(), sample.target_length);
    if (!warned_.contains(row)) {
      const auto prompt = static_cast<int64_t>(sample.tokens.size());
      const std::string what = fmt::format("{} at {} tokens: ", method.label(), sample.target_length);
      if (warn_if_budget_covers_prompt(*method.budget, prompt, what)) warned_.insert(row);
    }
  }

  SamplerParams params = sampling_;
  params.seed = sample_seed_of(sampling_.seed, sample);
  Sampler sampler(params);

  const Tokenizer& tokenizer = model_->tokenizer();
  GenerateOptions generate_options;
  generate_options.n_predict = sample.max_new_tokens;
  const GenerateResult result = generate(session, sample.tokens, generate_options, sampler, [&](int32_t token) {
    return !(sample.stop_at_newline && tokenizer.token_piece(token).find('\n') != std::string::npos);
  });

  eval::SampleRun run;
  // Bytes that form no character become U+FFFD, as Python's decode(errors="replace") does.
  StreamingDecoder decoder(tokenizer);
  for (int32_t token : result.tokens) run.prediction += decoder.push(token);
  run.prediction += decoder.finish();
  if (sample.stop_at_newline) run.prediction = run.prediction.substr(0, run.prediction.find('\n'));
  run.generated_tokens = static_cast<int64_t>(result.tokens.size());
  run.stop = result.stop == StopReason::kCallback ? "newline" : stop_reason_name(result.stop);
  const SessionTimings& t = session.timings();
  run.prefill_seconds = t.prefill_seconds;
  run.decode_seconds = t.decode_seconds;
  run.decode_tokens = t.decode_tokens;
  run.capture_seconds = t.capture_seconds;
  run.eviction_seconds = t.eviction_seconds;
  if (const auto& eviction = session.last_eviction()) run.kv_bytes_after_eviction = eviction->bytes;
  run.peak_kv_bytes = kv_peak_bytes(session);
  return run;
}

}  // namespace deferkv::cli
