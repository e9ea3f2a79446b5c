#include "server/batch_scheduler.h"

#include <spdlog/spdlog.h>

namespace deferkv::server {

namespace {

// The engine's outcome as the HTTP layer reads it: a cancelled sequence ended by shutdown
// (cancel_all) or by its client (cancel), a failure logged.
GenerationOutcome outcome_of(const SequenceOutcome& s, int64_t prompt_tokens, int64_t cached_tokens,
                             bool shutting_down) {
  GenerationOutcome o;
  o.stop = s.result.stop;
  o.started = s.started;
  o.error = s.error;
  if (!s.error.empty()) {
    o.end = GenerationEnd::kFailed;
    spdlog::error("request failed: {}", s.error);
  } else if (s.cancelled) {
    o.end = shutting_down ? GenerationEnd::kShutdown : GenerationEnd::kCancelled;
  }
  GenerationUsage& u = o.usage;
  u.prompt_tokens = prompt_tokens + cached_tokens;
  u.cached_tokens = cached_tokens;
  o.context = s.context;
  u.completion_tokens = static_cast<int64_t>(s.result.tokens.size());
  u.kv_entries_kept = s.kv_entries_kept;
  u.kv_bytes = s.kv_bytes;
  u.kv_peak_bytes = s.kv_peak_bytes;
  u.capture_ms = s.timings.capture_seconds * 1e3;
  u.eviction_ms = s.timings.eviction_seconds * 1e3;
  u.prefill_ms = s.timings.prefill_seconds * 1e3;
  u.decode_ms = s.timings.decode_seconds * 1e3;
  return o;
}

}  // namespace

BatchScheduler::BatchScheduler(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                               const BatchEngineOptions& options, int64_t max_waiting)
    : max_waiting_(max_waiting), engine_(std::move(model), std::move(pool), options) {
  driver_ = std::thread([this] {
    while (engine_.wait_for_work()) engine_.step();
  });
}

BatchScheduler::~BatchScheduler() {
  cancel_all();
  driver_.join();
}

RequestId BatchScheduler::submit(GenerationRequest request, GenerationCallbacks callbacks) {
  std::lock_guard lock(submit_mutex_);
  if (shutting_down_) throw SubmitError(SubmitRefusal::kShuttingDown, "the server is shutting down");
  if (const int64_t waiting = engine_.stats().waiting; waiting >= max_waiting_) {
    throw SubmitError(SubmitRefusal::kQueueFull,
                      fmt::format("{} requests are waiting for a slot, the server's limit (--max-queue); retry later",
                                  waiting));
  }
  const auto prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const auto cached_tokens = request.context ? static_cast<int64_t>(request.context->tokens().size()) : 0;
  SequenceCallbacks cb;
  cb.on_start = std::move(callbacks.on_start);
  cb.on_token = std::move(callbacks.on_token);
  cb.on_logprobs = std::move(callbacks.on_logprobs);
  cb.on_finish = [this, on_finish = std::move(callbacks.on_finish), prompt_tokens,
                 cached_tokens](const SequenceOutcome& s) {
    on_finish(outcome_of(s, prompt_tokens, cached_tokens, shutting_down_));
  };
  try {
    return engine_.submit(std::move(request), std::move(cb));
  } catch (const Error& e) {
    // The engine refuses a request only after cancel_all (which may come after the check
    // above) or for KV it can never hold (deferkv/batch_engine.h).
    throw SubmitError(shutting_down_ ? SubmitRefusal::kShuttingDown : SubmitRefusal::kKvMemoryExceeded, e.what());
  }
}

void BatchScheduler::cancel(RequestId id) { engine_.cancel(id); }

void BatchScheduler::cancel_all() {
  shutting_down_ = true;  // first: the requests it cancels end as kShutdown
  engine_.cancel_all();
}

SchedulerStats BatchScheduler::stats() const { return engine_.stats(); }

}  // namespace deferkv::server
