// The thread pool: parallel_for tiles the range exactly once in grain-aligned chunks, one
// per thread at most; run_on_all reaches every thread once; results written by the
// workers are visible to the caller when a section returns (under ThreadSanitizer,
// scripts/sanitize.sh, a missing happens-before edge is a report); a pool with more
// threads than cores (which sleeps instead of spinning) still runs every section; the
// cgroup CPU quota is read as whole cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <mutex>
#include <tuple>
#include <vector>

#include "base/thread_pool.h"

namespace deferkv {
namespace {

struct Chunk {
  int64_t begin, end;
  int thread;
  bool operator<(const Chunk& o) const { return begin < o.begin; }
};

std::vector<Chunk> chunks_of(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int thread) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back({begin, end, thread});
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPool, ParallelForTilesTheRangeInGrainAlignedChunks) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 64, 1000, 1001}) {
      for (int64_t grain : {0, 1, 3, 16, 100}) {
        SCOPED_TRACE(testing::Message() << "threads " << threads << " n " << n << " grain " << grain);
        const std::vector<Chunk> chunks = chunks_of(pool, n, grain);
        const int64_t step = std::max<int64_t>(1, grain);
        const int64_t units = (n + step - 1) / step;
        EXPECT_EQ(static_cast<int64_t>(chunks.size()), std::min<int64_t>(units, threads));
        int64_t next = 0;
        std::vector<int> threads_seen;
        for (size_t i = 0; i < chunks.size(); ++i) {
          EXPECT_EQ(chunks[i].begin, next);
          EXPECT_LT(chunks[i].begin, chunks[i].end);
          EXPECT_EQ(chunks[i].begin % step, 0);
          if (i + 1 < chunks.size()) EXPECT_EQ(chunks[i].end % step, 0);
          EXPECT_GE(chunks[i].thread, 0);
          EXPECT_LT(chunks[i].thread, threads);
          threads_seen.push_back(chunks[i].thread);
          next = chunks[i].end;
        }
        EXPECT_EQ(next, n);
        std::sort(threads_seen.begin(), threads_seen.end());
        EXPECT_EQ(std::adjacent_find(threads_seen.begin(), threads_seen.end()), threads_seen.end())
            << "a thread ran two chunks";
      }
    }
  }
}

TEST(ThreadPool, RunOnAllReachesEveryThreadOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 20; ++round) {
    std::vector<int> calls(4, 0);  // each thread writes only its own slot
    pool.run_on_all([&](int thread) { ++calls[static_cast<size_t>(thread)]; });
    ASSERT_EQ(calls, std::vector<int>(4, 1)) << "round " << round;
  }
}

TEST(ThreadPool, WorkersResultsAreVisibleWhenASectionReturns) {
  // Many short sections, as the decode loop issues them: plain (non-atomic) writes by
  // the workers, read by the caller right after each section.
  ThreadPool pool(3);
  std::vector<int64_t> values(1000, 0);
  for (int64_t round = 1; round <= 50; ++round) {
    pool.parallel_for(static_cast<int64_t>(values.size()), 64, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) values[static_cast<size_t>(i)] = round * i;
    });
    int64_t sum = 0;
    for (int64_t v : values) sum += v;
    const auto n = static_cast<int64_t>(values.size());
    ASSERT_EQ(sum, round * n * (n - 1) / 2) << "round " << round;
  }
}

TEST(ThreadPool, PoolsThatNeverRanJoinTheirWorkers) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool idle(4);
    EXPECT_EQ(idle.size(), 4);
  }
  EXPECT_EQ(ThreadPool(0).size(), 1);  // at least the calling thread
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
