#include "eval/sweep/concurrent_jobs.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace deferkv::eval {

void run_concurrently(size_t n_jobs, int workers, const std::function<void(size_t job)>& run) {
  if (workers <= 1 || n_jobs <= 1) {
    for (size_t job = 0; job < n_jobs; ++job) run(job);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  auto worker = [&] {
    for (;;) {
      if (failed) return;
      const size_t job = next++;
      if (job >= n_jobs) return;
      try {
        run(job);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t n_threads = std::min(static_cast<size_t>(workers), n_jobs);
  for (size_t t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace deferkv::eval
