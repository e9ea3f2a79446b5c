#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include "deferkv/error.h"

namespace deferkv {
namespace {

// Two KV heads of size 2: entry i of head g holds keys (10*i + g, -(10*i + g)) and
// values (100*i + g, 0).
void append_tokens(KvCache& cache, int64_t layer, int first, int n) {
  std::vector<float> k, v;
  std::vector<int32_t> pos;
  for (int i = first; i < first + n; ++i) {
    for (int g = 0; g < 2; ++g) {
      k.insert(k.end(), {float(10 * i + g), float(-(10 * i + g))});
      v.insert(v.end(), {float(100 * i + g), 0.0f});
    }
    pos.push_back(i);
  }
  cache.append(layer, k.data(), v.data(), pos.data(), n);
}

TEST(KvCache, AppendSplitsRowsPerHeadAndKeepsPositions) {
  KvCache cache(1, 2, 2, 16);
  append_tokens(cache, 0, 0, 3);
  append_tokens(cache, 0, 3, 1);
  for (int g = 0; g < 2; ++g) {
    ASSERT_EQ(cache.length(0, g), 4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(cache.keys(0, g)[2 * i], 10 * i + g);
      EXPECT_EQ(cache.keys(0, g)[2 * i + 1], -(10 * i + g));
      EXPECT_EQ(cache.values(0, g)[2 * i], 100 * i + g);
      EXPECT_EQ(cache.positions(0, g)[i], i);
    }
  }
  // 2 heads x 4 entries x (2 keys + 2 values) floats + a position each.
  EXPECT_EQ(cache.bytes_held(), 2 * 4 * (4 * 4 + 4));
}

TEST(KvCache, TruncateDropsLaterPositionsAndBytes) {
  KvCache cache(2, 2, 2, 16);
  append_tokens(cache, 0, 0, 5);
  append_tokens(cache, 1, 0, 5);
  const int64_t peak = cache.bytes_held();
  cache.truncate(2);
  EXPECT_EQ(cache.length(0, 1), 2);
  EXPECT_EQ(cache.length(1, 0), 2);
  EXPECT_EQ(cache.bytes_held(), peak * 2 / 5);
  EXPECT_EQ(cache.peak_bytes(), peak);
  append_tokens(cache, 0, 2, 1);
  EXPECT_EQ(cache.positions(0, 0)[2], 2);
  EXPECT_EQ(cache.keys(0, 0)[4], 20);
}

TEST(KvCache, AppendBeyondCapacityIsAnError) {
  KvCache cache(1, 2, 2, 4);
  append_tokens(cache, 0, 0, 3);
  EXPECT_THROW(append_tokens(cache, 0, 3, 2), Error);
  EXPECT_EQ(cache.length(0, 0), 3);
}

}  // namespace
}  // namespace deferkv
