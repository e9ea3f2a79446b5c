// The thread pool: parallel_for covers the range exactly once in grain-aligned chunks,
// several a thread, whose boundaries depend only on (n, grain, threads); no two chunks
// run at once under one thread index; the threads that run take over the chunks of one
// that is stalled; an exception in a chunk reaches the caller and the pool runs on;
// results written by the workers are visible to the caller when a section returns
// (under ThreadSanitizer, scripts/sanitize.sh, a missing happens-before edge is a
// report); a pool with more threads than cores (which sleeps instead of spinning) still
// runs every section; the cgroup CPU quota is read as whole cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "base/thread_pool.h"

namespace deferkv {
namespace {

struct Chunk {
  int64_t begin, end;
  int thread;
  bool operator<(const Chunk& o) const { return begin < o.begin; }
};

// The threads counts tried: one, fewer than this machine's cores or as many, and
// (16) more than it has.
const std::vector<int> kThreadCounts = {1, 2, 3, 4, 7, 16};

// The chunks of one section, sorted, and how often each index was visited.
struct Section {
  std::vector<Chunk> chunks;
  std::vector<int> visits;
};

Section run_section(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mutex;
  Section s;
  s.visits.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int thread) {
    std::lock_guard<std::mutex> lock(mutex);
    s.chunks.push_back({begin, end, thread});
    for (int64_t i = begin; i < end; ++i) ++s.visits[static_cast<size_t>(i)];
  });
  std::sort(s.chunks.begin(), s.chunks.end());
  return s;
}

// Chunks the pool is meant to make, worked out here: the whole range on one thread,
// else four a thread, but no chunk smaller than a grain.
int64_t expected_chunks(int threads, int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  if (threads == 1) return 1;
  const int64_t step = std::max<int64_t>(1, grain);
  return std::min<int64_t>((n + step - 1) / step, 4 * threads);
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnceInGrainAlignedChunks) {
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 64, 1000, 1001}) {
      for (int64_t grain : {0, 1, 3, 16, 100}) {
        SCOPED_TRACE(testing::Message() << "threads " << threads << " n " << n << " grain " << grain);
        const Section s = run_section(pool, n, grain);
        EXPECT_EQ(s.visits, std::vector<int>(static_cast<size_t>(n), 1));
        EXPECT_EQ(static_cast<int64_t>(s.chunks.size()), expected_chunks(threads, n, grain));
        EXPECT_EQ(pool.chunk_count(n, grain), expected_chunks(threads, n, grain));
        const int64_t step = std::max<int64_t>(1, grain);
        int64_t next = 0;
        for (size_t i = 0; i < s.chunks.size(); ++i) {
          EXPECT_EQ(s.chunks[i].begin, next);
          EXPECT_LT(s.chunks[i].begin, s.chunks[i].end);
          EXPECT_EQ(s.chunks[i].begin % step, 0);
          if (i + 1 < s.chunks.size()) EXPECT_EQ(s.chunks[i].end % step, 0);
          EXPECT_GE(s.chunks[i].thread, 0);
          EXPECT_LT(s.chunks[i].thread, threads);
          next = s.chunks[i].end;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
}

// Sections of tiny chunks back to back, so that the threads claim chunks at the same
// moments: a chunk handed out twice, or none, shows as an index visited twice or never.
TEST(ThreadPool, ConcurrentClaimsHandOutEachChunkOnce) {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    const int64_t n = pool.chunk_count(1 << 20, 1);  // one index a chunk
    std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
    int64_t wrong = 0;
    for (int section = 0; section < 20000 && wrong == 0; ++section) {
      pool.parallel_for(n, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      });
      for (auto& v : visits) wrong += v.exchange(0, std::memory_order_relaxed) != 1;
    }
    EXPECT_EQ(wrong, 0) << threads << " threads";
  }
}

// Which thread runs a chunk varies from run to run; where the chunks fall does not, so
// a caller whose chunks write disjoint outputs gets the same bits every time.
TEST(ThreadPool, ChunkBoundariesDoNotDependOnTiming) {
  for (int threads : {2, 3, 16}) {
    ThreadPool pool(threads);
    const Section first = run_section(pool, 1001, 7);
    for (int round = 0; round < 50; ++round) {
      const Section again = run_section(pool, 1001, 7);
      ASSERT_EQ(again.chunks.size(), first.chunks.size());
      for (size_t i = 0; i < first.chunks.size(); ++i) {
        ASSERT_EQ(again.chunks[i].begin, first.chunks[i].begin) << threads << " threads, round " << round;
        ASSERT_EQ(again.chunks[i].end, first.chunks[i].end) << threads << " threads, round " << round;
      }
    }
  }
}

// Per-thread scratch indexed by the thread index stays private: a chunk never starts
// under an index whose previous chunk is still running.
TEST(ThreadPool, NoTwoRunningChunksShareAThreadIndex) {
  for (int threads : {2, 4, 16}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> running(static_cast<size_t>(threads));
    std::atomic<int> clashes{0};
    for (int section = 0; section < 300; ++section) {
      pool.parallel_for(4096, 16, [&](int64_t begin, int64_t end, int thread) {
        if (running[static_cast<size_t>(thread)].exchange(1) != 0) ++clashes;
        volatile int64_t sink = 0;
        for (int64_t i = begin; i < end; ++i) sink = sink + i * i;  // a little work, so chunks overlap in time
        running[static_cast<size_t>(thread)].store(0);
      });
    }
    EXPECT_EQ(clashes.load(), 0) << threads << " threads";
  }
}

// One chunk is held up (as if its thread were descheduled) until every other chunk is
// done: the other threads must take them all, including those a fixed share per thread
// would have left to the stalled one. It waits at most 20 s, then the test fails.
TEST(ThreadPool, ThreadsThatRunTakeOverAStalledThreadsChunks) {
  constexpr int64_t n = 1000, grain = 10;
  for (int threads : {2, 3, 16}) {
    ThreadPool pool(threads);
    const int64_t chunks = pool.chunk_count(n, grain);
    for (int64_t stalled : {int64_t{0}, int64_t{1}, chunks - 1}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, chunk " << stalled << " stalled");
      std::mutex mutex;
      std::condition_variable others_done;
      int64_t finished_others = 0;
      bool timed_out = false;
      std::vector<Chunk> ran;
      std::vector<int> visits(static_cast<size_t>(n), 0);
      pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int thread) {
        std::unique_lock<std::mutex> lock(mutex);
        ran.push_back({begin, end, thread});
        for (int64_t i = begin; i < end; ++i) ++visits[static_cast<size_t>(i)];
        if (begin == stalled * grain) {
          timed_out = !others_done.wait_for(lock, std::chrono::seconds(20), [&] { return finished_others == chunks - 1; });
        } else if (++finished_others == chunks - 1) {
          others_done.notify_all();
        }
      });
      ASSERT_FALSE(timed_out) << "the other chunks waited for the stalled thread";
      EXPECT_EQ(visits, std::vector<int>(static_cast<size_t>(n), 1));
      EXPECT_EQ(static_cast<int64_t>(ran.size()), chunks);
    }
  }
}

TEST(ThreadPool, AnExceptionInAChunkReachesTheCallerAndThePoolRunsOn) {
  for (int threads : {1, 2, 16}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> visits(1000);
    auto one_chunk_throws = [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) ++visits[static_cast<size_t>(i)];
      if (begin <= 500 && 500 < end) throw std::runtime_error("index 500 failed");
    };
    for (int round = 0; round < 20; ++round) {
      try {
        pool.parallel_for(1000, 8, one_chunk_throws);
        ADD_FAILURE() << "no exception";
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "index 500 failed");
      }
    }
    for (const auto& v : visits) EXPECT_LE(v.load(), 20);  // chunks after the failure may be skipped, none run twice
    // Every chunk throws: one exception comes out.
    EXPECT_THROW(pool.parallel_for(1000, 8, [](int64_t, int64_t, int) { throw std::runtime_error("all"); }),
                 std::runtime_error);
    const Section after = run_section(pool, 1000, 8);
    EXPECT_EQ(after.visits, std::vector<int>(1000, 1));
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
// sections, and 2000 back-to-back sections each cover their range.
TEST(ThreadPool, ManySectionsWithMoreThreadsThanCores) {
  for (int threads : {2, 16}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    for (int section = 0; section < 2000; ++section) {
      pool.parallel_for(64, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) total += i + 1;
      });
    }
    EXPECT_EQ(total.load(), 2000LL * 64 * 65 / 2) << threads << " threads";
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
