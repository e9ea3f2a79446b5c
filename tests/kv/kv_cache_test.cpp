#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "deferkv/error.h"

namespace deferkv {
namespace {

// These tests check exact stored floats, so they ask for an f32 cache; the storage
// types are tested in kv_cache_types_test.cpp.
constexpr KvCacheTypes kF32{DType::F32, DType::F32};
const float* keys(const KvCache& c, int64_t l, int64_t g) { return c.keys(l, g).f32(); }
const float* values(const KvCache& c, int64_t l, int64_t g) { return c.values(l, g).f32(); }

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
  KvCache cache(1, 2, 2, 16, kF32);
  append_tokens(cache, 0, 0, 3);
  append_tokens(cache, 0, 3, 1);
  for (int g = 0; g < 2; ++g) {
    ASSERT_EQ(cache.length(0, g), 4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(keys(cache, 0, g)[2 * i], 10 * i + g);
      EXPECT_EQ(keys(cache, 0, g)[2 * i + 1], -(10 * i + g));
      EXPECT_EQ(values(cache, 0, g)[2 * i], 100 * i + g);
      EXPECT_EQ(cache.positions(0, g)[i], i);
    }
  }
  // 2 heads x 4 entries x (2 keys + 2 values) floats + a position each.
  EXPECT_EQ(cache.bytes_held(), 2 * 4 * (4 * 4 + 4));
}

TEST(KvCache, TruncateDropsLaterPositionsAndBytes) {
  KvCache cache(2, 2, 2, 16, kF32);
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
  EXPECT_EQ(keys(cache, 0, 0)[4], 20);
}

TEST(KvCache, AppendBeyondCapacityIsAnError) {
  KvCache cache(1, 2, 2, 4, kF32);
  append_tokens(cache, 0, 0, 3);
  EXPECT_THROW(append_tokens(cache, 0, 3, 2), Error);
  EXPECT_EQ(cache.length(0, 0), 3);
}

// A prompt's rows go into the heads on the pool (one head a chunk, from 2^16 values on:
// 240 rows here, the 9 after them on the caller): every stored byte, position and count
// must be what the same rows stored from one thread are, for every storage type (q8_0 and
// q4_0 choose each head's key shift from its rows on the way).
TEST(KvCache, AppendOnAPoolStoresWhatOneThreadStores) {
  constexpr int64_t kHeads = 5, kDim = 64, kLen = 240;
  ThreadPool pool(3);
  std::vector<float> k(kLen * kHeads * kDim), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(0.01f * static_cast<float>(i)) * static_cast<float>(1 + i % 7);
    v[i] = std::cos(0.03f * static_cast<float>(i));
  }
  std::vector<int32_t> positions(kLen);
  for (int32_t i = 0; i < kLen; ++i) positions[static_cast<size_t>(i)] = 2 * i;
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    SCOPED_TRACE(dtype_name(type));
    KvCache alone(2, kHeads, kDim, 300, {type, type}), pooled(2, kHeads, kDim, 300, {type, type});
    for (int64_t layer : {0, 1}) {
      alone.append(layer, k.data(), v.data(), positions.data(), kLen);
      pooled.append(layer, k.data(), v.data(), positions.data(), kLen, &pool);
      // A second batch after the first (the heads' windows already hold rows).
      alone.append(layer, k.data(), v.data(), positions.data(), 9);
      pooled.append(layer, k.data(), v.data(), positions.data(), 9, &pool);
    }
    EXPECT_EQ(pooled.bytes_held(), alone.bytes_held());
    EXPECT_EQ(pooled.peak_bytes(), alone.peak_bytes());
    for (int64_t layer : {0, 1}) {
      for (int64_t g = 0; g < kHeads; ++g) {
        ASSERT_EQ(pooled.length(layer, g), kLen + 9);
        const int64_t n = pooled.length(layer, g);
        const KvRows a_keys = alone.keys(layer, g), p_keys = pooled.keys(layer, g);
        const KvRows a_values = alone.values(layer, g), p_values = pooled.values(layer, g);
        ASSERT_EQ(a_keys.row_bytes(), p_keys.row_bytes());
        std::vector<float> want(static_cast<size_t>(kDim)), got(static_cast<size_t>(kDim));
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_EQ(std::memcmp(p_keys.row(j), a_keys.row(j), a_keys.row_bytes()), 0) << "key " << j;
          ASSERT_EQ(std::memcmp(p_values.row(j), a_values.row(j), a_values.row_bytes()), 0) << "value " << j;
          a_keys.to_f32(j, 1, want.data());  // decoded too: the key shift each head chose
          p_keys.to_f32(j, 1, got.data());
          ASSERT_EQ(got, want) << "key " << j << " of layer " << layer << " head " << g;
          ASSERT_EQ(pooled.positions(layer, g)[j], alone.positions(layer, g)[j]);
        }
      }
    }
  }
}

void fill(KvCache& cache, int64_t layer, int first, int n) {
  const int64_t row = cache.n_head_kv() * cache.head_dim();
  std::vector<float> k(static_cast<size_t>(n * row)), v(k.size());
  std::vector<int32_t> pos;
  for (int i = 0; i < n; ++i) {
    for (int64_t x = 0; x < row; ++x) {
      k[i * row + x] = float(first + i) + 0.001f * float(x);
      v[i * row + x] = -k[i * row + x];
    }
    pos.push_back(first + i);
  }
  cache.append(layer, k.data(), v.data(), pos.data(), n);
}

TEST(KvCacheRetain, CompactsOneHeadKeepingPositionsAndOrder) {
  KvCache cache(1, 2, 4, 64, kF32);
  fill(cache, 0, 0, 10);
  cache.retain(0, 1, {0, 3, 4, 9});
  EXPECT_EQ(cache.length(0, 0), 10);
  ASSERT_EQ(cache.length(0, 1), 4);
  const int expected[] = {0, 3, 4, 9};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cache.positions(0, 1)[i], expected[i]);
    // Head 1's row of token t starts at dim 4: t + 0.004.
    EXPECT_FLOAT_EQ(keys(cache, 0, 1)[i * 4], float(expected[i]) + 0.004f);
    EXPECT_FLOAT_EQ(values(cache, 0, 1)[i * 4 + 3], -(float(expected[i]) + 0.007f));
  }
  EXPECT_EQ(cache.bytes_held(), 14 * cache.bytes_per_entry());
  EXPECT_EQ(cache.peak_bytes(), 20 * cache.bytes_per_entry());
  // New tokens continue at their true positions after the kept ones.
  fill(cache, 0, 10, 1);
  EXPECT_EQ(cache.positions(0, 1)[4], 10);
  EXPECT_FLOAT_EQ(keys(cache, 0, 1)[16], 10.004f);
}

TEST(KvCacheRetain, RejectsUnsortedOrOutOfRangeIndices) {
  KvCache cache(1, 1, 4, 16, kF32);
  fill(cache, 0, 0, 5);
  EXPECT_THROW(cache.retain(0, 0, {2, 1}), Error);
  EXPECT_THROW(cache.retain(0, 0, {1, 1}), Error);
  EXPECT_THROW(cache.retain(0, 0, {5}), Error);
  EXPECT_EQ(cache.length(0, 0), 5);
}

TEST(KvCacheRetain, FreesRealMemory) {
  // 2 heads x 1024 dims x 4 B = 4 KiB a token per buffer: every dropped token frees a page.
  KvCache cache(1, 2, 1024, 512, kF32);
  fill(cache, 0, 0, 512);
  const int64_t before = cache.resident_bytes();
  EXPECT_GE(before, 2 * 512 * 2 * 4096);
  for (int64_t g = 0; g < 2; ++g) cache.retain(0, g, {0, 100, 511});
  const int64_t after = cache.resident_bytes();
  EXPECT_LT(after, before / 50) << "resident bytes did not drop: " << before << " -> " << after;
  EXPECT_EQ(cache.bytes_held(), 6 * cache.bytes_per_entry());
}

TEST(KvCacheLayers, PerLayerBytesAndPeaks) {
  KvCache cache(2, 2, 4, 32, kF32);
  fill(cache, 0, 0, 8);
  fill(cache, 1, 0, 8);
  cache.retain(1, 0, {7});
  EXPECT_EQ(cache.entries(0), 16);
  EXPECT_EQ(cache.entries(1), 9);
  EXPECT_EQ(cache.layer_bytes(1), 9 * cache.bytes_per_entry());
  EXPECT_EQ(cache.layer_peak_bytes(1), 16 * cache.bytes_per_entry());
  EXPECT_EQ(cache.bytes_held(), cache.layer_bytes(0) + cache.layer_bytes(1));
}

TEST(KvCacheSnapshot, RestoreUndoesEvictionAndAppends) {
  KvCache cache(1, 2, 4, 32, kF32);
  fill(cache, 0, 0, 6);
  const KvCache::Snapshot saved = cache.snapshot();
  cache.retain(0, 0, {1, 2});
  fill(cache, 0, 6, 3);
  cache.restore(saved);
  for (int64_t g = 0; g < 2; ++g) {
    ASSERT_EQ(cache.length(0, g), 6);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(cache.positions(0, g)[i], i);
      EXPECT_FLOAT_EQ(keys(cache, 0, g)[i * 4], float(i) + 0.004f * float(g));
    }
  }
  EXPECT_EQ(cache.bytes_held(), 12 * cache.bytes_per_entry());
  KvCache other(2, 2, 4, 32, kF32);
  EXPECT_THROW(other.restore(saved), Error);
}

// A snapshot of another shape would write past the heads' storage: refused, nothing changed.
TEST(KvCacheSnapshot, RestoreRefusesAnotherHeadDimOrTooSmallACapacity) {
  KvCache cache(1, 2, 4, 32, kF32);
  fill(cache, 0, 0, 6);
  const KvCache::Snapshot saved = cache.snapshot();
  KvCache wider(1, 2, 8, 32, kF32);
  EXPECT_THROW(wider.restore(saved), Error);
  KvCache small(1, 2, 4, 4, kF32);
  fill(small, 0, 0, 2);
  try {
    small.restore(saved);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holding 6 entries in a head into a cache of 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small.length(0, 0), 2);
  EXPECT_EQ(small.length(0, 1), 2);
}

TEST(KvCacheTruncate, WorksOnRaggedHeads) {
  KvCache cache(1, 2, 4, 32, kF32);
  fill(cache, 0, 0, 10);
  cache.retain(0, 0, {0, 5, 8});
  cache.truncate(6);
  EXPECT_EQ(cache.length(0, 0), 2);
  EXPECT_EQ(cache.length(0, 1), 6);
  EXPECT_EQ(cache.bytes_held(), 8 * cache.bytes_per_entry());
}

}  // namespace
}  // namespace deferkv
