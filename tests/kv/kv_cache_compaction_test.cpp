// Compaction (retain, erase), truncation, snapshots and appends in long random mixes,
// against a plain reference: per head a list of entries, each its position and the bytes
// the cache stored for its key and value when it was appended. After every operation the
// cache must hold exactly the reference's entries, in order: what attention reads (the
// view's length, positions and rows) is the kept entries and nothing else. And the pages
// of a shrinking head go back to the OS in batches, not at every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/attention.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

constexpr int64_t kLayers = 2, kHeads = 3, kDim = 64, kCapacity = 400;

struct Entry {
  int32_t position;
  std::vector<uint8_t> key, value;
  bool operator==(const Entry&) const = default;
};
using Reference = std::vector<std::vector<Entry>>;  // [layer * kHeads + g]

std::vector<uint8_t> row_bytes(const KvRows& rows, int64_t j) {
  return {rows.row(j), rows.row(j) + rows.row_bytes()};
}

std::vector<Entry> entries_of(const KvCache& cache, int64_t l, int64_t g) {
  const KvHeadView view = cache.view(l, g);
  std::vector<Entry> out;
  for (int64_t j = 0; j < view.length; ++j) {
    out.push_back({view.positions[j], row_bytes(view.keys, j), row_bytes(view.values, j)});
  }
  return out;
}

void expect_same(const KvCache& cache, const Reference& ref, const std::string& after) {
  int64_t entries = 0;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kHeads; ++g) {
      const std::vector<Entry>& want = ref[static_cast<size_t>(l * kHeads + g)];
      ASSERT_EQ(cache.length(l, g), static_cast<int64_t>(want.size())) << after << ", layer " << l << " head " << g;
      ASSERT_TRUE(entries_of(cache, l, g) == want) << after << ", layer " << l << " head " << g;
      entries += static_cast<int64_t>(want.size());
    }
  }
  ASSERT_EQ(cache.bytes_held(), entries * cache.bytes_per_entry()) << after;
}

// Sorted distinct indices below n, each taken with probability p.
std::vector<int32_t> random_subset(int64_t n, double p, std::mt19937& rng) {
  std::bernoulli_distribution take(p);
  std::vector<int32_t> out;
  for (int64_t j = 0; j < n; ++j) {
    if (take(rng)) out.push_back(static_cast<int32_t>(j));
  }
  return out;
}

class KvCacheCompactionTest : public ::testing::TestWithParam<DType> {};

TEST_P(KvCacheCompactionTest, MixedOperationsMatchAPlainReference) {
  const DType type = GetParam();
  KvCache cache(kLayers, kHeads, kDim, kCapacity, {type, type});
  Reference ref(kLayers * kHeads);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int32_t next_position = 0;
  std::vector<std::pair<KvCache::Snapshot, Reference>> saved;

  size_t most_holes = 0;
  for (int op = 0; op < 1500; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 11)(rng);
    const auto l = std::uniform_int_distribution<int64_t>(0, kLayers - 1)(rng);
    const auto g = std::uniform_int_distribution<int64_t>(0, kHeads - 1)(rng);
    std::vector<Entry>& head = ref[static_cast<size_t>(l * kHeads + g)];
    std::string what;
    if (kind <= 3) {  // append to every layer, as the forward pass does (one token, or a batch)
      const int n = kind == 0 ? std::uniform_int_distribution<int>(2, 20)(rng) : 1;
      int64_t longest = 0;
      for (const auto& h : ref) longest = std::max<int64_t>(longest, static_cast<int64_t>(h.size()));
      if (longest + n > kCapacity) continue;
      std::vector<int32_t> positions(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = next_position + i;
      next_position += n;
      for (int64_t layer = 0; layer < kLayers; ++layer) {
        std::vector<float> k(static_cast<size_t>(n * kHeads * kDim)), v(k.size());
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        cache.append(layer, k.data(), v.data(), positions.data(), n);
        for (int64_t h = 0; h < kHeads; ++h) {
          const KvHeadView view = cache.view(layer, h);
          for (int64_t j = view.length - n; j < view.length; ++j) {
            ref[static_cast<size_t>(layer * kHeads + h)].push_back(
                {view.positions[j], row_bytes(view.keys, j), row_bytes(view.values, j)});
          }
        }
      }
      what = fmt::format("op {}: append {}", op, n);
    } else if (kind <= 5) {  // retain: one head keeps a random subset (often most of it)
      const std::vector<int32_t> keep = random_subset(static_cast<int64_t>(head.size()), kind == 4 ? 0.5 : 0.95, rng);
      cache.retain(l, g, keep);
      std::vector<Entry> kept;
      for (int32_t j : keep) kept.push_back(head[static_cast<size_t>(j)]);
      head = kept;
      what = fmt::format("op {}: retain {} of layer {} head {}", op, keep.size(), l, g);
    } else if (kind <= 7) {  // erase: one head drops a few entries (a per-step press)
      const std::vector<int32_t> drop = random_subset(static_cast<int64_t>(head.size()), kind == 6 ? 0.02 : 0.3, rng);
      cache.erase(l, g, drop);
      for (auto j = drop.rbegin(); j != drop.rend(); ++j) head.erase(head.begin() + *j);
      what = fmt::format("op {}: erase {} of layer {} head {}", op, drop.size(), l, g);
    } else if (kind >= 10) {  // erase lazily: a per-step press drops one or two entries, the rows wait as holes
      const std::vector<int32_t> drop = random_subset(static_cast<int64_t>(head.size()), kind == 10 ? 0.005 : 0.05, rng);
      cache.erase_lazily(l, g, drop);
      for (auto j = drop.rbegin(); j != drop.rend(); ++j) head.erase(head.begin() + *j);
      ASSERT_LE(cache.keys(l, g).holes.size(), KvCache::kMaxHoles);
      what = fmt::format("op {}: erase lazily {} of layer {} head {}", op, drop.size(), l, g);
    } else if (kind == 8) {  // truncate to a random earlier position (a rollback), now and then
      if (std::uniform_int_distribution<int>(0, 3)(rng) != 0 || next_position == 0) continue;
      const auto position = std::uniform_int_distribution<int32_t>(next_position / 2, next_position)(rng);
      cache.truncate(position);
      for (auto& h : ref) {
        h.erase(std::remove_if(h.begin(), h.end(), [&](const Entry& e) { return e.position >= position; }), h.end());
      }
      next_position = position;
      what = fmt::format("op {}: truncate to {}", op, position);
    } else if (saved.empty() || std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
      saved.emplace_back(cache.snapshot(), ref);
      what = fmt::format("op {}: snapshot", op);
    } else {  // restore one of the snapshots taken so far
      const auto& [snapshot, snapshot_ref] = saved[std::uniform_int_distribution<size_t>(0, saved.size() - 1)(rng)];
      cache.restore(snapshot);
      ref = snapshot_ref;
      next_position = 0;
      for (const auto& h : ref) {
        if (!h.empty()) next_position = std::max(next_position, h.back().position + 1);
      }
      what = fmt::format("op {}: restore", op);
    }
    ASSERT_NO_FATAL_FAILURE(expect_same(cache, ref, what));
    for (int64_t h = 0; h < kLayers * kHeads; ++h) most_holes = std::max(most_holes, cache.keys(h / kHeads, h % kHeads).holes.size());
  }
  EXPECT_GE(most_holes, 8u) << "the mix never left many holes";
}

INSTANTIATE_TEST_SUITE_P(F32F16Q8, KvCacheCompactionTest, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(KvCacheErase, IsRetainOfTheOtherIndices) {
  KvCache a(1, 1, kDim, 64, {DType::F32, DType::F32}), b(1, 1, kDim, 64, {DType::F32, DType::F32});
  std::vector<float> k(40 * kDim), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i), v[i] = -static_cast<float>(i);
  std::vector<int32_t> positions(40);
  for (int i = 0; i < 40; ++i) positions[static_cast<size_t>(i)] = 3 * i;
  a.append(0, k.data(), v.data(), positions.data(), 40);
  b.append(0, k.data(), v.data(), positions.data(), 40);
  a.erase(0, 0, {0, 5, 6, 39});
  std::vector<int32_t> rest;
  for (int32_t j = 0; j < 40; ++j) {
    if (j != 0 && j != 5 && j != 6 && j != 39) rest.push_back(j);
  }
  b.retain(0, 0, rest);
  EXPECT_TRUE(entries_of(a, 0, 0) == entries_of(b, 0, 0));
  EXPECT_EQ(a.view(0, 0).positions[4], 21);  // entry 7, moved forward by the three before it
  EXPECT_EQ(a.bytes_held(), 36 * a.bytes_per_entry());
}

TEST(KvCacheErase, RejectsUnsortedOrOutOfRangeIndices) {
  KvCache cache(1, 1, kDim, 8, {DType::F32, DType::F32});
  std::vector<float> k(4 * kDim), v(k.size());
  const std::vector<int32_t> positions = {0, 1, 2, 3};
  cache.append(0, k.data(), v.data(), positions.data(), 4);
  EXPECT_THROW(cache.erase(0, 0, {2, 1}), Error);
  EXPECT_THROW(cache.erase(0, 0, {4}), Error);
  EXPECT_EQ(cache.length(0, 0), 4);
}

// f32 rows of 1024 values: every entry's key and value fill a page each, so a head's
// unused tail reaches the release batch after kReleaseBatchBytes / 8 KiB entries.
constexpr int64_t kPageDim = 1024;
constexpr int64_t kBatchEntries = KvCache::kReleaseBatchBytes / (2 * kPageDim * 4);

void append_pages(KvCache& cache, int32_t first, int64_t n) {
  std::vector<float> k(static_cast<size_t>(n * kPageDim), 1.0f), v(k.size(), 2.0f);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
  cache.append(0, k.data(), v.data(), positions.data(), n);
}

TEST(KvCachePages, ReleasedInBatchesAsAHeadShrinks) {
  ASSERT_GE(kBatchEntries, 2);
  KvCache cache(1, 1, kPageDim, 256, {DType::F32, DType::F32});
  append_pages(cache, 0, 64);
  const int64_t full = cache.resident_bytes();
  EXPECT_GE(full, 64 * 2 * kPageDim * 4);
  // Fewer entries than a batch dropped: the pages stay (no madvise, nothing to fault in again).
  for (int64_t i = 1; i < kBatchEntries; ++i) {
    cache.erase(0, 0, {0});
    EXPECT_EQ(cache.resident_bytes(), full) << i << " entries dropped";
  }
  // The batch is reached: the whole unused tail goes back at once.
  cache.erase(0, 0, {0});
  EXPECT_LE(cache.resident_bytes(), full - kBatchEntries * 2 * kPageDim * 4);
  EXPECT_EQ(cache.bytes_held(), (64 - kBatchEntries) * cache.bytes_per_entry());
}

TEST(KvCachePages, APerStepPressDoesNotChurnPages) {
  // Drop one, append one, for many steps (Moment-KV, TOVA, a sliding window): pages go back
  // only in whole batches, never one at a time, whatever the head's length or the window's
  // start in a page, and the resident memory stays within a batch on either side of the
  // entries held.
  KvCache cache(1, 1, kPageDim, 256, {DType::F32, DType::F32});
  append_pages(cache, 0, 100);
  const int64_t entry_bytes = 2 * kPageDim * 4;
  for (int32_t step = 0; step < 600; ++step) {
    const int64_t before = cache.resident_bytes();
    cache.erase(0, 0, {static_cast<int32_t>(4 + step % 90)});
    const int64_t after = cache.resident_bytes();
    EXPECT_TRUE(after == before || before - after >= KvCache::kReleaseBatchBytes)
        << "step " << step << ": " << before - after << " bytes released";
    append_pages(cache, 100 + step, 1);
    EXPECT_LE(cache.resident_bytes(), 100 * entry_bytes + 2 * KvCache::kReleaseBatchBytes + 4 * entry_bytes)
        << "step " << step;
  }
  EXPECT_EQ(cache.length(0, 0), 100);
}

// A sliding window: each step drops the oldest entry after the sinks and appends one, for
// long enough that the window runs through its storage several times.
TEST(KvCacheSlidingWindow, KeepsTheSinksAndTheNewestEntriesOverManyPassesOfItsStorage) {
  constexpr int64_t kSinks = 4, kWindow = 60, kContext = 64;
  KvCache cache(1, 1, kDim, kContext, {DType::F16, DType::F16});
  std::vector<float> k(kDim), v(kDim);
  std::vector<Entry> ref;
  for (int32_t position = 0; position < 7 * kContext; ++position) {
    for (int64_t d = 0; d < kDim; ++d) {
      k[static_cast<size_t>(d)] = static_cast<float>(position) + 0.01f * static_cast<float>(d);
      v[static_cast<size_t>(d)] = -k[static_cast<size_t>(d)];
    }
    cache.append(0, k.data(), v.data(), &position, 1);
    const KvHeadView view = cache.view(0, 0);
    ref.push_back({position, row_bytes(view.keys, view.length - 1), row_bytes(view.values, view.length - 1)});
    if (static_cast<int64_t>(ref.size()) > kWindow) {
      cache.erase(0, 0, {static_cast<int32_t>(kSinks)});
      ref.erase(ref.begin() + kSinks);
    }
    ASSERT_TRUE(entries_of(cache, 0, 0) == ref) << "after position " << position;
  }
  EXPECT_EQ(cache.view(0, 0).positions[kSinks], 7 * kContext - (kWindow - kSinks));
}

TEST(KvCacheErase, MovesTheShorterSideOfTheDroppedEntries) {
  KvCache cache(1, 1, kDim, 64, {DType::F32, DType::F32});
  std::vector<float> k(40 * kDim), v(k.size());
  std::vector<int32_t> positions(40);
  for (int i = 0; i < 40; ++i) positions[static_cast<size_t>(i)] = i;
  cache.append(0, k.data(), v.data(), positions.data(), 40);
  // Near the front: the four entries before move back, the 35 after stay where they are.
  const uint8_t* last_key = cache.keys(0, 0).row(39);
  cache.erase(0, 0, {4});
  EXPECT_EQ(cache.keys(0, 0).row(38), last_key);
  EXPECT_EQ(cache.positions(0, 0)[4], 5);
  // Near the back: the entries after move forward, the first stays where it is.
  const uint8_t* first_key = cache.keys(0, 0).row(0);
  cache.retain(0, 0, [] {
    std::vector<int32_t> keep;
    for (int32_t j = 0; j < 39; ++j) {
      if (j != 30 && j != 36) keep.push_back(j);
    }
    return keep;
  }());
  EXPECT_EQ(cache.keys(0, 0).row(0), first_key);
  EXPECT_EQ(cache.positions(0, 0)[30], 32);
  EXPECT_EQ(cache.length(0, 0), 37);
}

// One entry dropped per step from a 200-entry head: the rows stay where they are, as
// holes, until there are more than kMaxHoles; then one compaction closes them all.
TEST(KvCacheLazyErase, LeavesRowsInPlaceUntilMoreThanMaxHoles) {
  constexpr int64_t kEntriesHeld = 200;
  KvCache cache(1, 1, kDim, 400, {DType::F16, DType::F16});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(kEntriesHeld * kDim), v(k.size());
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<int32_t> positions(kEntriesHeld);
  for (int32_t i = 0; i < kEntriesHeld; ++i) positions[static_cast<size_t>(i)] = i;
  cache.append(0, k.data(), v.data(), positions.data(), kEntriesHeld);
  std::vector<Entry> ref = entries_of(cache, 0, 0);
  const uint8_t* first_row = cache.keys(0, 0).data;
  for (size_t step = 1; step <= KvCache::kMaxHoles; ++step) {
    const auto j = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, cache.length(0, 0) - 1)(rng));
    cache.erase_lazily(0, 0, {j});
    ref.erase(ref.begin() + j);
    ASSERT_EQ(cache.keys(0, 0).holes.size(), step);
    ASSERT_EQ(cache.keys(0, 0).data, first_row) << "rows moved at step " << step;
    ASSERT_TRUE(entries_of(cache, 0, 0) == ref) << "step " << step;
    ASSERT_EQ(cache.bytes_held(), static_cast<int64_t>(ref.size()) * cache.bytes_per_entry());
  }
  cache.erase_lazily(0, 0, {0});
  ref.erase(ref.begin());
  EXPECT_TRUE(cache.keys(0, 0).holes.empty()) << "more than kMaxHoles holes, not compacted";
  EXPECT_TRUE(entries_of(cache, 0, 0) == ref);
  // An eager erase closes whatever holes there are.
  cache.erase_lazily(0, 0, {10});
  cache.erase(0, 0, {20});
  ref.erase(ref.begin() + 10);
  ref.erase(ref.begin() + 20);
  EXPECT_TRUE(cache.keys(0, 0).holes.empty());
  EXPECT_TRUE(entries_of(cache, 0, 0) == ref);
}

// The attention over a head with holes is the attention over the same entries compacted:
// two caches take the same entries and drop the same ones, lazily and at once, and every
// query's output is the same floats (the f32 cache's weighted values aside, kv_rows.h).
TEST(KvCacheLazyErase, AttentionOverHolesIsAttentionOverTheKeptEntries) {
  constexpr int64_t kHeadsKv = 2, kGroup = 3, kLen = 180;
  ThreadPool pool(2);
  for (DType type : {DType::F16, DType::BF16, DType::Q8_0, DType::F32}) {
    SCOPED_TRACE(dtype_name(type));
    KvCache lazy(1, kHeadsKv, kDim, 400, {type, type}), eager(1, kHeadsKv, kDim, 400, {type, type});
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> k(kLen * kHeadsKv * kDim), v(k.size());
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    std::vector<int32_t> positions(kLen);
    for (int32_t i = 0; i < kLen; ++i) positions[static_cast<size_t>(i)] = i;
    for (KvCache* c : {&lazy, &eager}) c->append(0, k.data(), v.data(), positions.data(), kLen - 4);
    for (int step = 0; step < 20; ++step) {
      for (int64_t g = 0; g < kHeadsKv; ++g) {
        const std::vector<int32_t> drop = random_subset(lazy.length(0, g), 0.01, rng);
        lazy.erase_lazily(0, g, drop);
        eager.erase(0, g, drop);
      }
    }
    ASSERT_FALSE(lazy.keys(0, 0).holes.empty());
    // A decode step (one query) and a batch of three (the causal prefill path).
    for (int64_t n : {1, 3}) {
      const int64_t first = kLen - 4 + (n == 1 ? 0 : 1);
      for (KvCache* c : {&lazy, &eager}) {
        c->append(0, k.data() + first * kHeadsKv * kDim, v.data() + first * kHeadsKv * kDim, positions.data() + first, n);
      }
      const AttentionShape shape{kHeadsKv * kGroup, kHeadsKv, kDim, 0.125f};
      std::vector<float> q(static_cast<size_t>(n * shape.n_head * kDim));
      for (float& x : q) x = normal(rng);
      std::vector<std::vector<float>> out;
      for (KvCache* c : {&lazy, &eager}) {
        std::vector<KvHeadView> views;
        for (int64_t g = 0; g < kHeadsKv; ++g) views.push_back(c->view(0, g));
        AttentionScratch scratch;
        scratch.reserve(pool.size(), 400);
        out.emplace_back(q.size());
        attention(q.data(), n, shape, views, out.back().data(), scratch, pool);
      }
      for (size_t i = 0; i < q.size(); ++i) {
        if (type == DType::F32) {
          ASSERT_NEAR(out[0][i], out[1][i], 1e-5f) << "n=" << n << " at " << i;
        } else {
          ASSERT_EQ(out[0][i], out[1][i]) << "n=" << n << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deferkv
