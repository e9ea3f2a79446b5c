#pragma once
// The one thread pool of a process (sized by --threads). parallel_for splits a range
// into grain-aligned chunks, several per thread, which the calling thread and the
// workers take one at a time from a shared counter until none is left; it returns when
// every chunk is done.
//
// Why chunks are handed out rather than assigned: a thread that shares its core (more
// threads than cores, or another process busy) may be descheduled for milliseconds. With
// one fixed share per thread, every parallel section waited for the descheduled thread's
// share; now the threads that run take the chunks it has not started, and a section waits
// only for a chunk already begun. Chunk boundaries depend on (n, grain, size()) alone,
// never on which thread runs a chunk, so a caller whose chunks write disjoint outputs
// gets bit-identical results whatever the timing.
//
// Waiting adapts to the machine. The decode loop issues thousands of short parallel
// sections per second, so a waiter first spins (a wake-up through the kernel costs tens
// of microseconds); but a spinning thread on a core it shares takes the time the thread
// it waits for needs. So each waiter spins for a budget that shrinks whenever a wait
// outlasts it and grows back when waits end while spinning, then sleeps on the atomic it
// waits for (a futex); a pool with more threads than the cores it may use does not spin.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace deferkv {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Work (multiply-adds, or values written) below which a chunk is not worth handing to
  // another thread: waking a worker costs microseconds, which tiny models' projections and a
  // few cache rows do not repay. Callers size their grains or skip the pool by it.
  static constexpr int64_t kMinWorkPerChunk = 1 << 16;

  // Calls fn(begin, end, thread_index) over [0, n) in chunks whose boundaries are
  // multiples of `grain` (except the last): chunk_count(n, grain) of them, each exactly
  // once, from threads 0 (the caller) .. size()-1. A thread may run several chunks, one
  // after another, so per-thread scratch indexed by thread_index is never shared between
  // two running chunks. The first exception a chunk throws is rethrown here once every
  // chunk has finished or been skipped (the chunks not yet begun are skipped).
  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);

  // How many chunks parallel_for(n, grain, ...) makes: one with a single thread, else up
  // to kChunksPerThread a thread, never more than whole grains in n.
  int64_t chunk_count(int64_t n, int64_t grain) const;

  // The cores this process may run on: its CPU affinity mask, capped by a cgroup CPU
  // quota (cpu.max) when one is set. The default of --threads.
  static int default_threads();
  // cgroup v2's cpu.max ("max 100000" or "<quota> <period>") as whole cores, rounded
  // up; nullopt when unlimited or unreadable.
  static std::optional<int> cores_of_cpu_max(std::string_view cpu_max);

  // Chunks a thread: enough that the threads that run can take over the share of one
  // that does not, few enough that handing them out stays cheap beside a short section.
  static constexpr int64_t kChunksPerThread = 4;

 private:
  // How long a waiter spins before it sleeps, in pause instructions; one per waiting
  // thread, adapted after each wait: doubled when the value changed during the spin or
  // soon after it (the other threads were finishing their share, and a sleeping thread
  // wakes late: on a VM an idle vCPU can lose its core for a while), halved when the
  // sleep was long (a thread descheduled for another process, or no work coming).
  class SpinBudget {
   public:
    explicit SpinBudget(bool may_spin) : limit_(may_spin ? kMax : 0), may_spin_(may_spin) {}
    // Spins until value != old or the budget is spent, then sleeps until it changes.
    template <typename T>
    void wait_while_equal(const std::atomic<T>& value, T old);

   private:
    static constexpr int kMin = 256, kMax = 16384;
    // A sleep shorter than this counts as "soon after": about a scheduler's time slice, and
    // longer than a prompt's chunks on the 100M model (bench/README.md, "Prompts on two
    // threads"); after chunks that take longer, a late wake-up costs them little.
    static constexpr std::chrono::microseconds kLongSleep{2000};
    int limit_;
    bool may_spin_;
  };

  void worker_loop(int index);
  // Takes chunks of the current section until none is left, runs them as `thread`, and
  // adds how many it ran to done_.
  void run_chunks(int thread);
  void run_chunk(int64_t chunk, int64_t chunks, int thread);

  int n_threads_;
  bool may_spin_;              // no more threads than cores
  SpinBudget caller_budget_;   // the calling thread's, while it waits for the workers

  // The current section. Written by the caller before it publishes claims_, read only by
  // a thread that holds a claim on one of its chunks: the section cannot end (and the
  // caller cannot rewrite these) before that chunk is counted in done_.
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 0, units_ = 0;
  // The section's chunk count (high 32 bits) and the chunks handed out (low 32 bits):
  // one fetch_add claims the next chunk. A thread stops at its first claim past the
  // count, so the low half never overflows (at most two such claims a thread a section).
  std::atomic<uint64_t> claims_{0};
  std::atomic<int32_t> done_{0};  // chunks finished or skipped (a futex word); the caller waits for all
  std::mutex error_mutex_;
  std::exception_ptr error_;      // the first a chunk threw, under error_mutex_
  std::atomic<bool> failed_{false};

  std::vector<std::thread> workers_;
  // A new section or the stop, announced to the workers (32 bits: a futex word; it may
  // wrap, workers only compare it with the last one they saw).
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace deferkv
