#include "server/connection_threads.h"

namespace deferkv::server {

ConnectionThreads::ConnectionThreads(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  jobs_.push_back(std::move(fn));
  // A thread for every job that no idle thread will take.
  if (jobs_.size() > idle_ && threads_.size() < max_threads_ && !shutdown_) {
    threads_.emplace_back([this] { work(); });
  } else {
    wake_.notify_one();
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (auto& t : threads) t.join();
}

size_t ConnectionThreads::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

void ConnectionThreads::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    wake_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
    --idle_;
    if (jobs_.empty()) return;  // shut down, and nothing left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace deferkv::server
