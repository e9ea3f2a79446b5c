// A scored press's capture stays matched to its KV head: values follow their entries by
// position through appends, through entries another press drops without telling it, and
// through rollbacks (truncate, restore) that refill positions with new tokens (which score
// 0, not the old tokens' values); its own drops keep it matched without a search.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kv/kv_cache.h"
#include "press/core/captured_attention.h"

namespace deferkv {
namespace {

constexpr int64_t kDim = 32;

void append(KvCache& cache, std::vector<int32_t> positions) {
  const std::vector<float> rows(positions.size() * kDim, 0.5f);
  cache.append(0, rows.data(), rows.data(), positions.data(), static_cast<int64_t>(positions.size()));
}

std::vector<int32_t> positions_of(const KvCache& cache) {
  return {cache.positions(0, 0), cache.positions(0, 0) + cache.length(0, 0)};
}

// The values a capture holding 100 + p for each position p in `seen` should have now.
std::vector<float> expected(const KvCache& cache, const std::vector<int32_t>& seen) {
  std::vector<float> out;
  for (int32_t p : positions_of(cache)) {
    out.push_back(std::find(seen.begin(), seen.end(), p) != seen.end() ? 100.0f + static_cast<float>(p) : 0.0f);
  }
  return out;
}

TEST(CapturedAttention, ValuesFollowTheirEntriesHoweverTheHeadChanges) {
  KvCache cache(1, 1, kDim, 64);
  std::vector<int32_t> first(10);
  std::iota(first.begin(), first.end(), 0);
  append(cache, first);
  CapturedAttention c;
  c.fit(0, cache.view(0, 0));
  ASSERT_EQ(c.values[0], std::vector<float>(10, 0.0f));
  for (size_t j = 0; j < 10; ++j) c.values[0][j] = 100.0f + static_cast<float>(j);
  std::vector<int32_t> seen = first;

  append(cache, {10, 11, 12});  // new entries score 0
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], expected(cache, seen));
  EXPECT_EQ(c.positions[0], positions_of(cache));

  // Another press drops three entries, then as many arrive: the capture is as long as the
  // head again, but its values must move with their entries.
  cache.erase(0, 0, {1, 4, 11});
  append(cache, {13, 14, 15});
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], expected(cache, seen));
  EXPECT_EQ(c.positions[0], positions_of(cache));

  // This press's own drop, followed without a search.
  cache.erase(0, 0, {0, 2});
  c.follow_erase(0, {0, 2}, cache.version(0, 0), true);
  EXPECT_EQ(c.values[0], expected(cache, seen));
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], expected(cache, seen));
  EXPECT_EQ(c.positions[0], positions_of(cache));

  // A rollback to position 8 and new tokens at 8 and 9: not the entries seen before.
  cache.truncate(8);
  append(cache, {8, 9, 10, 11, 12});
  seen = {2, 5, 6, 7};
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], expected(cache, seen));
  EXPECT_EQ(c.positions[0], positions_of(cache));

  // Another press drops the newest entry (12), a rollback to 12 then drops nothing, and a
  // new token takes position 12.
  for (size_t j = 0; j < c.values[0].size(); ++j) c.values[0][j] = 100.0f + static_cast<float>(c.positions[0][j]);
  seen = positions_of(cache);
  cache.erase(0, 0, {static_cast<int32_t>(cache.length(0, 0) - 1)});
  cache.truncate(12);
  append(cache, {12});
  seen.pop_back();
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], expected(cache, seen));

  // A restored snapshot may hold other tokens anywhere: everything scores 0.
  const KvCache::Snapshot snapshot = cache.snapshot();
  cache.restore(snapshot);
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], std::vector<float>(static_cast<size_t>(cache.length(0, 0)), 0.0f));
  for (size_t j = 0; j < c.values[0].size(); ++j) c.values[0][j] = 1.0f;

  // Dropped with its values zeroed (a press scoring afresh at every step).
  cache.erase(0, 0, {1});
  c.follow_erase(0, {1}, cache.version(0, 0), false);
  c.fit(0, cache.view(0, 0));
  EXPECT_EQ(c.values[0], std::vector<float>(static_cast<size_t>(cache.length(0, 0)), 0.0f));
  EXPECT_EQ(c.positions[0], positions_of(cache));
}

TEST(CapturedAttention, HeadsOfAnotherCacheAreNeverTakenForTheSameEntries) {
  // Versions are unique across caches: equal positions in another cache start afresh.
  KvCache a(1, 1, kDim, 8), b(1, 1, kDim, 8);
  append(a, {0, 1, 2});
  append(b, {0, 1, 2, 3});
  EXPECT_NE(a.version(0, 0), b.version(0, 0));
  CapturedAttention c;
  c.fit(0, a.view(0, 0));
  c.values[0] = {1.0f, 2.0f, 3.0f};
  c.fit(0, b.view(0, 0));  // the same positions: followed by position, not assumed appended
  EXPECT_EQ(c.values[0], (std::vector<float>{1.0f, 2.0f, 3.0f, 0.0f}));
  EXPECT_EQ(c.versions[0], b.version(0, 0));
}

}  // namespace
}  // namespace deferkv
