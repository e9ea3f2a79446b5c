#pragma once
// The Scheduler on the batch engine: one thread steps the engine while it has sequences,
// so every running request advances by a token in each batched forward pass; requests
// wait for admission under the KV memory cap (deferkv/batch_engine.h), at most
// `max_waiting` of them at once.
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "deferkv/batch_engine.h"
#include "server/scheduler.h"

namespace deferkv::server {

class BatchScheduler : public Scheduler {
 public:
  static constexpr int64_t kUnlimitedQueue = std::numeric_limits<int64_t>::max();

  BatchScheduler(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                 const BatchEngineOptions& options, int64_t max_waiting = kUnlimitedQueue);
  // Cancels what is left and waits for its on_finish calls.
  ~BatchScheduler() override;

  RequestId submit(GenerationRequest request, GenerationCallbacks callbacks) override;
  void cancel(RequestId id) override;
  void cancel_all() override;
  SchedulerStats stats() const override;

  int64_t n_ctx() const override { return engine_.n_ctx(); }
  int64_t kv_bytes_per_token() const { return engine_.kv_bytes_per_token(); }

  std::shared_ptr<const CompressedContext> find_context(const std::string& id) override {
    return engine_.find_context(id);
  }
  std::optional<ResidentContext> find_context_prefix(const std::vector<int32_t>& prompt,
                                                     const std::string& press, const KvBudget& budget) override {
    return engine_.find_context_prefix(prompt, press, budget);
  }
  std::optional<ResidentContext> describe_context(const std::string& id) const override {
    return engine_.describe_context(id);
  }
  std::vector<ResidentContext> contexts() const override { return engine_.contexts(); }
  bool remove_context(const std::string& id) override { return engine_.remove_context(id); }

 private:
  const int64_t max_waiting_;
  // The queue's length is checked and the request queued under it, so that submits at once
  // never pass the limit together.
  std::mutex submit_mutex_;
  std::atomic<bool> shutting_down_{false};
  BatchEngine engine_;
  std::thread driver_;
};

}  // namespace deferkv::server
