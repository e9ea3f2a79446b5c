#pragma once
// A Scheduler for tests of the HTTP layer alone: it records what is submitted and cancelled,
// refuses a submit when told to, and runs nothing; the test drives each request's callbacks
// (on_start, on_token, on_finish) itself. The test and the server (which owns the
// scheduler) share one FakeScheduler::State.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "server/http_server.h"
#include "server/scheduler.h"

namespace deferkv::testing {

class FakeScheduler : public server::Scheduler {
 public:
  struct Submitted {
    server::GenerationRequest request;
    server::GenerationCallbacks callbacks;
    server::RequestId id = 0;
  };
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::shared_ptr<Submitted>> submitted;
    std::vector<server::RequestId> cancelled;  // by cancel(), in order
    bool cancelled_all = false;
    int64_t n_ctx = 256;
    // Called on each submit before it is recorded: throwing from it refuses the request.
    std::function<void(const server::GenerationRequest&, size_t index)> on_submit;

    // The n-th request submitted (from 0), once it is; nullptr after 10 s.
    std::shared_ptr<Submitted> wait_for_submit(size_t n) {
      std::unique_lock lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(10), [&] { return submitted.size() > n; });
      return submitted.size() > n ? submitted[n] : nullptr;
    }
    // Whether `id` was cancelled within 10 s.
    bool wait_for_cancel(server::RequestId id) {
      std::unique_lock lock(mutex);
      return changed.wait_for(lock, std::chrono::seconds(10), [&] {
        for (server::RequestId c : cancelled) {
          if (c == id) return true;
        }
        return false;
      });
    }
  };

  explicit FakeScheduler(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // The factory for HttpServer: every scheduler it makes shares `state`.
  static server::SchedulerFactory factory(std::shared_ptr<State> state) {
    return [state](std::shared_ptr<const Model>, const server::ServerOptions&) {
      return std::make_unique<FakeScheduler>(state);
    };
  }

  server::RequestId submit(server::GenerationRequest request, server::GenerationCallbacks callbacks) override {
    std::lock_guard lock(state_->mutex);
    if (state_->on_submit) state_->on_submit(request, state_->submitted.size());
    auto s = std::make_shared<Submitted>();
    s->id = state_->submitted.size() + 1;
    s->request = std::move(request);
    s->callbacks = std::move(callbacks);
    state_->submitted.push_back(s);
    state_->changed.notify_all();
    return s->id;
  }
  void cancel(server::RequestId id) override {
    std::lock_guard lock(state_->mutex);
    state_->cancelled.push_back(id);
    state_->changed.notify_all();
  }
  // Shutdown: the requests still open end as kShutdown, as BatchScheduler's do (the test
  // must not drive them after this).
  void cancel_all() override {
    std::vector<std::shared_ptr<Submitted>> open;
    {
      std::lock_guard lock(state_->mutex);
      state_->cancelled_all = true;
      open = state_->submitted;
      state_->changed.notify_all();
    }
    for (const auto& s : open) {
      if (!s->callbacks.on_finish) continue;
      server::GenerationOutcome o;
      o.end = server::GenerationEnd::kShutdown;
      std::exchange(s->callbacks.on_finish, nullptr)(o);
    }
  }
  server::SchedulerStats stats() const override { return {}; }
  int64_t n_ctx() const override { return state_->n_ctx; }

 private:
  std::shared_ptr<State> state_;
};

// Ends a request the test drives, once: on_finish with `outcome`.
inline void finish(FakeScheduler::Submitted& s, const server::GenerationOutcome& outcome) {
  std::exchange(s.callbacks.on_finish, nullptr)(outcome);
}

}  // namespace deferkv::testing
