#pragma once
// The one thread pool of a process (sized by --threads). parallel_for splits a range
// into contiguous chunks, runs them on the workers and the calling thread, and returns
// when all are done.
//
// Waiting adapts to the machine. The decode loop issues thousands of short parallel
// sections per second, so a waiter first spins (a wake-up through the kernel costs tens
// of microseconds); but a spinning thread on a core it shares (more threads than cores,
// or another process busy) takes the time the thread it waits for needs. So each waiter
// spins for a budget that shrinks whenever a wait outlasts it and grows back when waits
// end while spinning, then sleeps on the atomic it waits for (a futex); a pool with more
// threads than the cores it may use does not spin at all.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
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

  // The cores this process may run on: its CPU affinity mask, capped by a cgroup CPU
  // quota (cpu.max) when one is set. The default of --threads.
  static int default_threads();
  // cgroup v2's cpu.max ("max 100000" or "<quota> <period>") as whole cores, rounded
  // up; nullopt when unlimited or unreadable.
  static std::optional<int> cores_of_cpu_max(std::string_view cpu_max);

 private:
  // How long a waiter spins before it sleeps, in pause instructions; one per waiting
  // thread, adapted after each wait.
  class SpinBudget {
   public:
    explicit SpinBudget(bool may_spin) : limit_(may_spin ? kMax : 0), may_spin_(may_spin) {}
    // Spins until value != old or the budget is spent, then sleeps until it changes.
    template <typename T>
    void wait_while_equal(const std::atomic<T>& value, T old);

   private:
    static constexpr int kMin = 256, kMax = 16384;
    int limit_;
    bool may_spin_;
  };

  void worker_loop(int index);

  int n_threads_;
  bool may_spin_;              // no more threads than cores
  SpinBudget caller_budget_;   // the calling thread's, while it waits for the workers
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  // A new job or the stop, announced to the workers (32 bits: a futex word; it may wrap,
  // workers only compare it with the last one they saw).
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};          // workers still running the job
  std::atomic<bool> stopping_{false};
};

}  // namespace deferkv
