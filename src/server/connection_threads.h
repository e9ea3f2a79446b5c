#pragma once
// The threads cpp-httplib runs connections on. Each connection holds its thread while its
// request waits for a slot or generates (and a streamed one for its whole stream), so a
// pool of fixed size fills with generation requests under load, and GET /health then
// waits in the queue behind them (10 s with -np 4 and 20 streams, enough for an
// orchestrator to kill a healthy server). Here a connection that finds no idle thread
// starts a new one, up to a bound far above any useful load, so probes never queue behind
// generation; the threads stay for the next connections (they are idle, asleep on a
// condition variable) until shutdown.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace deferkv::server {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  // `max_threads`: past it, connections wait for a free thread (as in a fixed pool).
  explicit ConnectionThreads(size_t max_threads);
  ~ConnectionThreads() override;

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread.
  void shutdown() override;

  size_t threads() const;

 private:
  void work();

  const size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;  // threads waiting for a job
  bool shutdown_ = false;
};

}  // namespace deferkv::server
