#pragma once
// The first Scheduler: a queue served by N slots. Each slot is a thread that runs one
// request at a time in its own Session, on the model and thread pool all slots share; the
// slots' forward passes take turns (ForwardTurns), so running requests advance token by
// token together. A request waits in the queue until a slot is free and its projected KV
// fits under the memory cap (KvAdmission), first come, first served.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "deferkv/model.h"
#include "deferkv/session.h"
#include "server/forward_turns.h"
#include "server/kv_admission.h"
#include "server/scheduler.h"

namespace deferkv {
class ThreadPool;
}

namespace deferkv::server {

struct SlotSchedulerOptions {
  int n_slots = 1;
  int64_t kv_capacity_bytes = 0;
  SessionOptions session;
};

class SlotScheduler : public Scheduler {
 public:
  SlotScheduler(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                const SlotSchedulerOptions& options);
  ~SlotScheduler() override;

  RequestId submit(GenerationRequest request, GenerationCallbacks callbacks) override;
  void cancel(RequestId id) override;
  void cancel_all() override;
  SchedulerStats stats() const override;

  // One token's KV over every layer and KV head, in the sessions' storage type.
  int64_t kv_bytes_per_token() const { return bytes_per_token_; }
  // The context size every session gets.
  int64_t n_ctx() const { return n_ctx_; }

 private:
  struct Job {
    RequestId id = 0;
    GenerationRequest request;
    GenerationCallbacks callbacks;
    KvProjection projection;
    std::atomic<bool> cancelled{false};
    std::atomic<int64_t> kv_bytes{0};  // its cache's bytes now, for stats()
    int64_t reserved = 0;              // guarded by mutex_
  };

  void slot_loop();
  // The first waiting job when it fits (FIFO: a big one at the front holds back the rest).
  std::shared_ptr<Job> take_admissible_job();
  // Runs the job in a new session; on_finish is left to the caller.
  GenerationOutcome run(Job& job);
  void shrink_reservation(Job& job, int64_t bytes);

  std::shared_ptr<const Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  SlotSchedulerOptions options_;
  int64_t bytes_per_token_ = 0;
  int64_t n_ctx_ = 0;
  ForwardTurns turns_;

  mutable std::mutex mutex_;
  std::condition_variable work_;
  KvAdmission admission_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::map<RequestId, std::shared_ptr<Job>> running_;
  RequestId next_id_ = 1;
  bool stopping_ = false;
  std::vector<std::thread> slots_;
};

}  // namespace deferkv::server
