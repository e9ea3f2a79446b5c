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
  if (may_spin_) limit_ = std::max(kMin, limit_ / 2);
  while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
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

void ThreadPool::worker_loop(int index) {
  SpinBudget budget(may_spin_);
  uint32_t seen = 0;
  for (;;) {
    budget.wait_while_equal(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    (*job_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // publishes job_ and pending_
  generation_.notify_all();
  fn(0);
  // The last worker to finish notifies; earlier decrements only end a spin.
  for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire)) {
    caller_budget_.wait_while_equal(pending_, left);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(std::min<int64_t>(units, n_threads_));
  if (chunks == 1) {
    fn(0, n, 0);
    return;
  }
  run_on_all([&](int t) {
    if (t >= chunks) return;
    const int64_t begin = units * t / chunks * grain;
    const int64_t end = std::min(n, units * (t + 1) / chunks * grain);
    if (begin < end) fn(begin, end, t);
  });
}

}  // namespace deferkv
