#include "server/slot_scheduler.h"

#include <spdlog/spdlog.h>

#include "deferkv/error.h"

namespace deferkv::server {
namespace {

int64_t total_entries(const KvStats& kv) {
  int64_t n = 0;
  for (const KvLayerStats& layer : kv.layers) n += layer.entries;
  return n;
}

}  // namespace

SlotScheduler::SlotScheduler(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                             const SlotSchedulerOptions& options)
    : model_(std::move(model)), pool_(std::move(pool)), options_(options),
      admission_(options.kv_capacity_bytes) {
  if (options.n_slots < 1) fail("the number of slots (-np) must be at least 1, got {}", options.n_slots);
  if (options.kv_capacity_bytes <= 0) fail("the KV memory cap must be positive");
  // A probe session (its cache is reserved, not committed) tells the context size and the
  // storage type's bytes.
  const Session probe(model_, pool_, options_.session);
  const KvStats kv = probe.kv_stats();
  bytes_per_token_ = kv.bytes_per_entry * kv.n_layer * kv.n_head_kv;
  n_ctx_ = probe.n_ctx();
  for (int i = 0; i < options.n_slots; ++i) slots_.emplace_back([this] { slot_loop(); });
}

SlotScheduler::~SlotScheduler() {
  cancel_all();
  for (auto& t : slots_) t.join();
}

RequestId SlotScheduler::submit(GenerationRequest request, GenerationCallbacks callbacks) {
  auto job = std::make_shared<Job>();
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t kept = request.press == nullptr  ? -1
                       : request.budget.is_set() ? request.budget.resolve(prompt)
                                                 : prompt;
  job->projection = project_kv(bytes_per_token_, prompt, request.max_tokens, kept);
  job->request = std::move(request);
  job->callbacks = std::move(callbacks);
  std::lock_guard lock(mutex_);
  if (stopping_) fail("the server is shutting down");
  if (!admission_.can_ever_fit(job->projection.peak_bytes)) {
    fail("the request needs {} bytes of KV cache ({} prompt + {} new tokens) but the server's "
         "KV memory (--kv-memory) is {} bytes",
         job->projection.peak_bytes, prompt, job->request.max_tokens, admission_.capacity());
  }
  job->id = next_id_++;
  waiting_.push_back(job);
  work_.notify_all();
  return job->id;
}

void SlotScheduler::cancel(RequestId id) {
  std::lock_guard lock(mutex_);
  for (auto& job : waiting_) {
    if (job->id == id) job->cancelled = true;
  }
  if (auto it = running_.find(id); it != running_.end()) it->second->cancelled = true;
  work_.notify_all();  // a cancelled waiting job is finished by the next free slot
}

void SlotScheduler::cancel_all() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (auto& job : waiting_) job->cancelled = true;
  for (auto& [id, job] : running_) job->cancelled = true;
  work_.notify_all();
}

SchedulerStats SlotScheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s;
  s.running = static_cast<int64_t>(running_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  for (const auto& [id, job] : running_) s.kv_bytes_used += job->kv_bytes;
  s.kv_bytes_reserved = admission_.reserved();
  s.kv_bytes_capacity = admission_.capacity();
  return s;
}

std::shared_ptr<SlotScheduler::Job> SlotScheduler::take_admissible_job() {
  if (waiting_.empty()) return nullptr;
  std::shared_ptr<Job> job = waiting_.front();
  if (!job->cancelled) {
    if (!admission_.fits(job->projection.peak_bytes)) return nullptr;
    job->reserved = job->projection.peak_bytes;
    admission_.reserve(job->reserved);
  }
  waiting_.pop_front();
  running_[job->id] = job;
  return job;
}

void SlotScheduler::slot_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return (job = take_admissible_job()) != nullptr || (stopping_ && waiting_.empty()); });
      if (job == nullptr) return;
    }
    const GenerationOutcome outcome = run(*job);
    {
      std::lock_guard lock(mutex_);
      admission_.release(job->reserved);
      running_.erase(job->id);
    }
    work_.notify_all();  // the memory it held may admit a waiting request
    // Last, so whoever learns of the end from it sees the request gone from stats().
    job->callbacks.on_finish(outcome);
  }
}

void SlotScheduler::shrink_reservation(Job& job, int64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    if (bytes >= job.reserved) return;
    admission_.release(job.reserved - bytes);
    job.reserved = bytes;
  }
  work_.notify_all();
}

GenerationOutcome SlotScheduler::run(Job& job) {
  GenerationOutcome outcome;
  outcome.usage.prompt_tokens = static_cast<int64_t>(job.request.prompt.size());
  if (job.cancelled) {
    outcome.cancelled = true;
    return outcome;
  }
  try {
    Session session(model_, pool_, options_.session);
    const bool has_press = job.request.press != nullptr;
    session.set_press(std::move(job.request.press));
    Sampler sampler(job.request.sampling);
    GenerateOptions gen;
    gen.n_predict = job.request.max_tokens;
    auto after_step = [&] {
      job.kv_bytes = session.kv_stats().bytes;
      if (has_press && session.last_eviction().has_value()) shrink_reservation(job, job.projection.after_eviction);
    };
    gen.after_prefill = [&](const Session&) { after_step(); };
    // generate() runs the prefill and each decode step right after on_token returns, so a
    // turn is held from here to the end of the prefill, and from the end of each on_token
    // to the next: the forward passes, never the sampling or the callbacks.
    std::optional<ForwardTurn> turn(std::in_place, turns_);
    const GenerateResult result = generate(session, job.request.prompt, gen, sampler, [&](int32_t token) {
      turn.reset();
      after_step();
      if (job.cancelled || !job.callbacks.on_token(token)) return false;
      turn.emplace(turns_);
      return true;
    });
    turn.reset();
    const KvStats kv = session.kv_stats();
    outcome.stop = result.stop;
    outcome.cancelled = job.cancelled;
    outcome.usage.completion_tokens = static_cast<int64_t>(result.tokens.size());
    outcome.usage.kv_entries_kept = total_entries(kv);
    outcome.usage.kv_bytes = kv.bytes;
    outcome.usage.kv_peak_bytes = kv.peak_bytes;
    outcome.usage.capture_ms = session.timings().capture_seconds * 1e3;
    outcome.usage.eviction_ms = session.timings().eviction_seconds * 1e3;
    outcome.usage.prefill_ms = session.timings().prefill_seconds * 1e3;
    outcome.usage.decode_ms = session.timings().decode_seconds * 1e3;
  } catch (const std::exception& e) {
    spdlog::error("request {} failed: {}", job.id, e.what());
    outcome.error = e.what();
  }
  job.kv_bytes = 0;  // the session is gone
  return outcome;
}

}  // namespace deferkv::server
