// The thread pool: every index covered once, in chunks on grain boundaries, with as many
// threads as asked, also when there are more threads than cores (the pool then sleeps
// instead of spinning), and across many back-to-back sections as the decode loop issues.
#include "base/thread_pool.h"

#include <atomic>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace deferkv {
namespace {

void expect_covers_once(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_boundary{0}, calls{0};
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int t) {
    ++calls;
    if (begin % grain != 0 || (end % grain != 0 && end != n) || t < 0 || t >= pool.size()) ++bad_boundary;
    for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(bad_boundary.load(), 0);
  EXPECT_LE(calls.load(), pool.size());
}

TEST(ThreadPool, ParallelForCoversEachIndexOnceOnGrainBoundaries) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 64, 1000, 1001}) {
      for (int64_t grain : {1, 4, 16}) expect_covers_once(pool, n, grain);
    }
  }
}

TEST(ThreadPool, RunOnAllCallsEveryThreadIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run_on_all([&](int t) { ++seen[static_cast<size_t>(t)]; });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// 16 threads on this machine's few cores: the oversubscribed pool sleeps between
// sections, and 2000 back-to-back sections each see every worker.
TEST(ThreadPool, ManySectionsWithMoreThreadsThanCores) {
  for (int threads : {2, 16}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    for (int section = 0; section < 2000; ++section) {
      pool.run_on_all([&](int t) { total += t + 1; });
    }
    EXPECT_EQ(total.load(), 2000LL * threads * (threads + 1) / 2) << threads << " threads";
  }
}

TEST(ThreadPool, CgroupQuotaInWholeCores) {
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("200000 100000\n"), 2);
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("150000 100000"), 2);  // 1.5 cores: two threads may run
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("50000 100000"), 1);
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("garbage"), std::nullopt);
  EXPECT_EQ(ThreadPool::cores_of_cpu_max("0 100000"), std::nullopt);
  EXPECT_GE(ThreadPool::default_threads(), 1);
}

}  // namespace
}  // namespace deferkv
