#pragma once
// The one thread pool of a process (sized by --threads). parallel_for splits a range
// into contiguous chunks, runs them on the workers and the calling thread, and returns
// when all are done. Workers spin briefly before sleeping, because the decode loop
// issues thousands of short parallel sections per second.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deferkv {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) in at most size() chunks whose
  // boundaries are multiples of `grain` (except the last).
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t, int)>& fn);

  // Calls fn(thread_index) once on each of the size() threads.
  void run_on_all(const std::function<void(int)>& fn);

  static int default_threads();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stopping_ = false;
};

}  // namespace deferkv
