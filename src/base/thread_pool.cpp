#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace deferkv {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, CPU_COUNT(&set));
}

std::optional<int> cgroup_quota_cores() {
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return ThreadPool::cores_of_cpu_max(text.str());
}

}  // namespace

template <typename T>
void ThreadPool::SpinBudget::wait_while_equal(const std::atomic<T>& value, T old) {
  for (int i = 0; i < limit_; ++i) {
    if (value.load(std::memory_order_acquire) != old) {
      if (may_spin_) limit_ = std::min(kMax, limit_ * 2);
      return;
    }
    cpu_relax();
  }
  const auto sleep_start = std::chrono::steady_clock::now();
  while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
  if (!may_spin_) return;
  const bool long_sleep = std::chrono::steady_clock::now() - sleep_start >= kLongSleep;
  limit_ = long_sleep ? std::max(kMin, limit_ / 2) : std::min(kMax, limit_ * 2);
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      may_spin_(n_threads_ <= default_threads()),
      caller_budget_(may_spin_) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

std::optional<int> ThreadPool::cores_of_cpu_max(std::string_view cpu_max) {
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota = cpu_max.substr(0, space);
  std::string_view period = cpu_max.substr(space + 1);
  while (!period.empty() && (period.back() == '\n' || period.back() == ' ')) period.remove_suffix(1);
  int64_t q = 0, p = 0;
  if (quota == "max" || std::from_chars(quota.data(), quota.data() + quota.size(), q).ec != std::errc() ||
      std::from_chars(period.data(), period.data() + period.size(), p).ec != std::errc() || q <= 0 || p <= 0) {
    return std::nullopt;
  }
  return static_cast<int>((q + p - 1) / p);
}

int ThreadPool::default_threads() {
  static const int cores = [] {
    const int affinity = affinity_cores();
    const std::optional<int> quota = cgroup_quota_cores();
    return quota ? std::max(1, std::min(affinity, *quota)) : affinity;
  }();
  return cores;
}

int64_t ThreadPool::chunk_count(int64_t n, int64_t grain) const {
  if (n <= 0) return 0;
  const int64_t units = (n + std::max<int64_t>(1, grain) - 1) / std::max<int64_t>(1, grain);
  return n_threads_ == 1 ? 1 : std::min(units, kChunksPerThread * n_threads_);
}

void ThreadPool::worker_loop(int index) {
  SpinBudget budget(may_spin_);
  uint32_t seen = 0;
  for (;;) {
    budget.wait_while_equal(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    run_chunks(index);
  }
}

void ThreadPool::run_chunk(int64_t chunk, int64_t chunks, int thread) {
  if (failed_.load(std::memory_order_relaxed)) return;  // skipped: the section throws anyway
  const int64_t begin = units_ * chunk / chunks * grain_;
  const int64_t end = std::min(n_, units_ * (chunk + 1) / chunks * grain_);
  try {
    (*fn_)(begin, end, thread);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_relaxed);
  }
}

void ThreadPool::run_chunks(int thread) {
  int64_t ran = 0, chunks = 0;
  for (;;) {
    const uint64_t claim = claims_.fetch_add(1, std::memory_order_acq_rel);
    chunks = static_cast<int64_t>(claim >> 32);
    const auto chunk = static_cast<int64_t>(claim & 0xffffffffu);
    if (chunk >= chunks) break;
    run_chunk(chunk, chunks, thread);
    ++ran;
  }
  // Until these chunks are counted the section cannot end, so the last claim above was
  // on this section's word and `chunks` is its count. Only the caller waits on done_.
  if (ran > 0 && done_.fetch_add(static_cast<int32_t>(ran), std::memory_order_acq_rel) + ran == chunks && thread != 0) {
    done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn) {
  const int64_t chunks = chunk_count(n, grain);
  if (chunks == 0) return;
  if (chunks == 1) {
    fn(0, n, 0);
    return;
  }
  grain_ = std::max<int64_t>(1, grain);
  fn_ = &fn;
  n_ = n;
  units_ = (n + grain_ - 1) / grain_;
  error_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claims_.store(static_cast<uint64_t>(chunks) << 32, std::memory_order_release);  // publishes the above
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_chunks(0);
  for (int32_t done = done_.load(std::memory_order_acquire); done != chunks; done = done_.load(std::memory_order_acquire)) {
    caller_budget_.wait_while_equal(done_, done);
  }
  if (failed_.load(std::memory_order_relaxed)) std::rethrow_exception(error_);
}

}  // namespace deferkv
