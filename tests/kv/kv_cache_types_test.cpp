// The KV cache's storage types: the bytes each stores, the rounding of what it stores,
// and that compaction, truncation and snapshots move stored rows without re-rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"
#include "support/error_of.h"
#include "support/hadamard_matrix.h"

namespace deferkv {
namespace {

constexpr int64_t kDim = 64;  // two blocks of 32 per row
constexpr int64_t kHeads = 2;

// Hand-computed bytes of one row of kDim values: f32 4 B a value, f16/bf16 2 B, q8_0
// 34 B (an fp16 scale and 32 int8) per 32 values, q4_0 18 B (a scale and 16 bytes of nibbles).
int64_t expected_row_bytes(DType type) {
  switch (type) {
    case DType::F32: return kDim * 4;
    case DType::F16:
    case DType::BF16: return kDim * 2;
    case DType::Q8_0: return kDim / 32 * 34;
    case DType::Q4_0: return kDim / 32 * 18;
    default: return -1;
  }
}

// The largest error one stored value may carry relative to the largest magnitude of its
// block (`absmax`, the whole row's for the float types): half an ulp of f16 (2^-11) or
// bf16 (2^-8) of the value itself; q8_0 rounds to steps of d = absmax/127, half a step,
// plus d's own fp16 rounding over up to 127 steps; q4_0's steps are absmax/8 and the
// value opposite the extreme one clamps at 7 steps, so up to a whole step.
double max_error(DType type, float value, float absmax) {
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return std::abs(value) * 0x1p-11;
    case DType::BF16: return std::abs(value) * 0x1p-8;
    case DType::Q8_0: return absmax / 127 * (0.5 + 127 * 0x1p-11);
    case DType::Q4_0: return absmax / 8 * (1 + 8 * 0x1p-11);
    default: return -1;
  }
}

// Token t's rows: random values, distinct per (token, head, side).
std::vector<float> random_rows(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * kHeads * kDim));
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> row(const KvRows& rows, int64_t j) {
  std::vector<float> out(kDim);
  rows.to_f32(j, 1, out.data());
  return out;
}

class KvCacheTypesTest : public ::testing::TestWithParam<DType> {
 protected:
  DType type() const { return GetParam(); }
  // Keys in the parameter's type, values in f16 (and f32 keys' values in q8_0), so keys
  // and values of different types are covered too.
  KvCacheTypes types() const { return {type(), type() == DType::F32 ? DType::Q8_0 : DType::F16}; }

  // Appends n tokens from position `first` to `layer`; returns the keys and values fed.
  std::pair<std::vector<float>, std::vector<float>> append(KvCache& cache, int64_t layer, int first, int n) {
    auto k = random_rows(n, 1000u + static_cast<uint32_t>(first * 7 + layer));
    auto v = random_rows(n, 2000u + static_cast<uint32_t>(first * 7 + layer));
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[i] = first + i;
    cache.append(layer, k.data(), v.data(), pos.data(), n);
    return {k, v};
  }
};

TEST_P(KvCacheTypesTest, BytesPerEntryAreTheStorageSize) {
  KvCache cache(2, kHeads, kDim, 64, types());
  EXPECT_EQ(cache.key_row_bytes(), expected_row_bytes(type()));
  EXPECT_EQ(cache.value_row_bytes(), expected_row_bytes(types().values));
  EXPECT_EQ(cache.bytes_per_entry(), expected_row_bytes(type()) + expected_row_bytes(types().values) + 4);
  append(cache, 0, 0, 10);
  append(cache, 1, 0, 10);
  EXPECT_EQ(cache.bytes_held(), 2 * kHeads * 10 * cache.bytes_per_entry());
  cache.retain(1, 0, {2, 5});
  EXPECT_EQ(cache.bytes_held(), (2 * kHeads * 10 - 8) * cache.bytes_per_entry());
  EXPECT_EQ(cache.peak_bytes(), 2 * kHeads * 10 * cache.bytes_per_entry());
  EXPECT_EQ(cache.layer_bytes(1), (kHeads * 10 - 8) * cache.bytes_per_entry());
}

TEST(KvCacheTypes, HalfPrecisionIsExactlyHalfOfF32) {
  const KvCache f32(1, 1, kDim, 8, {DType::F32, DType::F32});
  const KvCache f16(1, 1, kDim, 8, {DType::F16, DType::F16});
  EXPECT_EQ(2 * (f16.key_row_bytes() + f16.value_row_bytes()), f32.key_row_bytes() + f32.value_row_bytes());
}

// Quantised rows are stored as round(H (x - shift)), H over the whole row of 64
// (kv_cache.h), so their rounding is checked where it happens: H (stored - shift) against
// H (x - shift), H built here from its definition. 20 entries at once give the keys a
// shift (KvCacheKeyShift below).
TEST_P(KvCacheTypesTest, StoredRowsCarryOnlyTheTypesRounding) {
  KvCache cache(1, kHeads, kDim, 32, types());
  const auto [k, v] = append(cache, 0, 0, 20);
  for (int64_t g = 0; g < kHeads; ++g) {
    for (int64_t i = 0; i < 20; ++i) {
      for (const auto& [stored_rows, fed, stored_type] :
           {std::tuple{cache.keys(0, g), &k, types().keys}, std::tuple{cache.values(0, g), &v, types().values}}) {
        const bool rotated = stored_type == DType::Q8_0 || stored_type == DType::Q4_0;
        EXPECT_EQ(stored_rows.coding.rotated, rotated);
        const float* shift = stored_rows.coding.shift;
        const std::vector<float> stored = row(stored_rows, i);
        const float* x = fed->data() + (i * kHeads + g) * kDim;
        std::vector<double> fed_coded(kDim), stored_coded(kDim);
        for (int64_t e = 0; e < kDim; ++e) {
          fed_coded[e] = x[e] - (shift != nullptr ? shift[e] : 0.0f);
          stored_coded[e] = stored[e] - (shift != nullptr ? shift[e] : 0.0f);
        }
        if (rotated) {
          fed_coded = testing::hadamard_by_definition(fed_coded, kDim);
          stored_coded = testing::hadamard_by_definition(stored_coded, kDim);
        }
        for (int64_t b = 0; b < kDim; b += 32) {
          double absmax = 0;
          for (int64_t e = b; e < b + 32; ++e) absmax = std::max(absmax, std::abs(fed_coded[e]));
          for (int64_t e = b; e < b + 32; ++e) {
            // Float32 arithmetic of the shift and the transform, both ways.
            const double slack = rotated || shift != nullptr ? 1e-5 * absmax : 0.0;
            EXPECT_LE(std::abs(stored_coded[e] - fed_coded[e]),
                      max_error(stored_type, static_cast<float>(fed_coded[e]), static_cast<float>(absmax)) + slack)
                << dtype_name(stored_type) << " head " << g << " entry " << i << " dim " << e;
          }
        }
      }
    }
  }
}

TEST_P(KvCacheTypesTest, RetainMovesStoredRowsUnchanged) {
  KvCache cache(1, kHeads, kDim, 32, types());
  append(cache, 0, 0, 12);
  std::vector<std::vector<float>> before_k, before_v;
  for (int64_t i = 0; i < 12; ++i) {
    before_k.push_back(row(cache.keys(0, 1), i));
    before_v.push_back(row(cache.values(0, 1), i));
  }
  const std::vector<int32_t> kept = {0, 4, 5, 11};
  cache.retain(0, 1, kept);
  ASSERT_EQ(cache.length(0, 1), 4);
  EXPECT_EQ(cache.length(0, 0), 12);
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(row(cache.keys(0, 1), static_cast<int64_t>(i)), before_k[kept[i]]) << i;
    EXPECT_EQ(row(cache.values(0, 1), static_cast<int64_t>(i)), before_v[kept[i]]) << i;
    EXPECT_EQ(cache.positions(0, 1)[i], kept[i]);
  }
  // A later entry lands after the kept ones at its true position.
  append(cache, 0, 12, 1);
  EXPECT_EQ(cache.positions(0, 1)[4], 12);
}

TEST_P(KvCacheTypesTest, SnapshotRestoreAndTruncateRoundTrip) {
  KvCache cache(2, kHeads, kDim, 32, types());
  append(cache, 0, 0, 8);
  append(cache, 1, 0, 8);
  cache.retain(1, 0, {1, 3, 6});
  const KvCache::Snapshot saved = cache.snapshot();
  auto rows_of = [&] {
    std::vector<std::vector<float>> all;
    for (int64_t l = 0; l < 2; ++l) {
      for (int64_t g = 0; g < kHeads; ++g) {
        for (int64_t i = 0; i < cache.length(l, g); ++i) {
          all.push_back(row(cache.keys(l, g), i));
          all.push_back(row(cache.values(l, g), i));
        }
      }
    }
    return all;
  };
  const auto original = rows_of();
  const int64_t bytes = cache.bytes_held();

  cache.truncate(4);  // drops positions 4..7; layer 1 head 0 keeps positions 1 and 3
  EXPECT_EQ(cache.length(0, 0), 4);
  EXPECT_EQ(cache.length(1, 0), 2);
  EXPECT_EQ(cache.bytes_held(), (4 + 4 + 2 + 4) * cache.bytes_per_entry());
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(row(cache.keys(0, 1), i), original[2 * (8 + i)]);  // head 1 of layer 0
  append(cache, 0, 4, 2);

  cache.restore(saved);
  EXPECT_EQ(cache.bytes_held(), bytes);
  EXPECT_EQ(rows_of(), original);
  EXPECT_EQ(cache.positions(1, 0)[2], 6);

  KvCache other_types(2, kHeads, kDim, 32, {type() == DType::F16 ? DType::F32 : DType::F16, types().values});
  EXPECT_THROW(other_types.restore(saved), Error);
}

INSTANTIATE_TEST_SUITE_P(EveryType, KvCacheTypesTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return kv_cache_type_name(info.param); });

// An empty head takes the mean of the first keys it is given at once as its shift (16 or
// more; fewer give none), keeps it while it holds entries, takes a new one once emptied,
// and a snapshot carries it. Only quantised keys have one.
TEST(KvCacheKeyShift, AnEmptyHeadTakesTheMeanOfItsFirstKeys) {
  const auto append = [](KvCache& cache, int first, int n, uint32_t seed) {
    const auto k = random_rows(n, seed), v = random_rows(n, seed + 1);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[i] = first + i;
    cache.append(0, k.data(), v.data(), pos.data(), n);
    return k;
  };
  const auto expect_mean_shift = [](const KvCache& cache, const std::vector<float>& k, int n) {
    for (int64_t g = 0; g < kHeads; ++g) {
      const float* shift = cache.keys(0, g).coding.shift;
      ASSERT_NE(shift, nullptr);
      EXPECT_EQ(cache.values(0, g).coding.shift, nullptr);
      for (int64_t e = 0; e < kDim; ++e) {
        double mean = 0;
        for (int i = 0; i < n; ++i) mean += k[(i * kHeads + g) * kDim + e] / n;
        EXPECT_NEAR(shift[e], mean, 1e-6) << "head " << g << " dim " << e;
      }
    }
  };
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    SCOPED_TRACE(dtype_name(type));
    KvCache cache(1, kHeads, kDim, 64, {type, DType::Q8_0});
    const auto first = append(cache, 0, 20, 1);
    if (type == DType::F16) {
      EXPECT_EQ(cache.keys(0, 0).coding.shift, nullptr);
      continue;
    }
    expect_mean_shift(cache, first, 20);
    append(cache, 20, 30, 3);  // a later append keeps it
    expect_mean_shift(cache, first, 20);

    const KvCache::Snapshot saved = cache.snapshot();
    cache.truncate(0);
    append(cache, 0, 3, 5);  // too few to take a mean from
    EXPECT_EQ(cache.keys(0, 0).coding.shift, nullptr);
    cache.truncate(0);
    const auto again = append(cache, 0, 16, 7);
    expect_mean_shift(cache, again, 16);

    KvCache restored(1, kHeads, kDim, 64, {type, DType::Q8_0});
    restored.restore(saved);
    expect_mean_shift(restored, first, 20);
    cache.restore(saved);
    for (int64_t j = 0; j < 50; ++j) EXPECT_EQ(row(restored.keys(0, 1), j), row(cache.keys(0, 1), j)) << j;
  }
}

// What the coding buys: keys that share a large part (8 and -6 in one block, 7 in the
// other) round 6.4x finer, and keys with one large dimension of their own in each block
// (which no shift removes) 2.8x finer, against q8_0 rows of the keys themselves (RMS error
// over 64 entries). Either half of the coding left out fails one of the two: without the
// shift the first gives 2.25x, without the rotation the second 1.04x (measured by
// disabling each in KvCache).
TEST(KvCacheKeyShift, RotationAndShiftShrinkTheRounding) {
  constexpr int n = 64;
  std::mt19937 rng(23);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::uniform_int_distribution<int> dim(0, 31);
  for (const bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "a shared large part" : "one large dimension each");
    std::vector<float> k(n * kHeads * kDim), v(k.size(), 0.0f);
    for (int i = 0; i < n * kHeads; ++i) {
      float* key = k.data() + i * kDim;
      for (int64_t e = 0; e < kDim; ++e) key[e] = noise(rng);
      if (shared) {
        key[3] += 8.0f;
        key[7] -= 6.0f;
        key[40] += 7.0f;
      } else {
        key[dim(rng)] += 8.0f;
        key[32 + dim(rng)] -= 8.0f;
      }
    }
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    KvCache cache(1, kHeads, kDim, n, {DType::Q8_0, DType::F16});
    cache.append(0, k.data(), v.data(), pos.data(), n);
    double coded = 0, plain = 0;
    std::vector<uint8_t> block(static_cast<size_t>(dtype_row_bytes(DType::Q8_0, kDim)));
    std::vector<float> rounded(kDim);
    for (int64_t g = 0; g < kHeads; ++g) {
      for (int i = 0; i < n; ++i) {
        const float* x = k.data() + (i * kHeads + g) * kDim;
        quantize_row(DType::Q8_0, x, block.data(), kDim);
        dequantize_row(DType::Q8_0, block.data(), rounded.data(), kDim);
        const std::vector<float> stored = row(cache.keys(0, g), i);
        for (int64_t e = 0; e < kDim; ++e) {
          coded += (stored[e] - x[e]) * (stored[e] - x[e]);
          plain += (rounded[e] - x[e]) * (rounded[e] - x[e]);
        }
      }
    }
    EXPECT_LT(std::sqrt(coded) * (shared ? 5 : 2), std::sqrt(plain)) << std::sqrt(plain / coded);
  }
}

using testing::error_of;

TEST(KvCacheTypes, NamesAreLlamaCppsAndUnknownOnesAreErrors) {
  EXPECT_EQ(kv_cache_type_from_name("f16"), DType::F16);
  EXPECT_EQ(kv_cache_type_from_name("Q8_0"), DType::Q8_0);
  EXPECT_EQ(kv_cache_type_from_name("q4_0"), DType::Q4_0);
  EXPECT_EQ(kv_cache_type_from_name("bf16"), DType::BF16);
  EXPECT_EQ(kv_cache_type_from_name("f32"), DType::F32);
  for (const char* bad : {"q4_k", "fp16", "", "q8"}) {
    const std::string message = error_of([&] { kv_cache_type_from_name(bad); });
    EXPECT_NE(message.find(fmt::format("'{}'", bad)), std::string::npos) << message;
    EXPECT_NE(message.find("f32, f16, bf16, q8_0, q4_0"), std::string::npos) << message;
  }
}

TEST(KvCacheTypes, QuantizedTypesNeedHeadsOfWholeBlocks) {
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const std::string message = error_of([&] { KvCache(1, 1, 40, 8, {DType::F16, type}); });
    EXPECT_NE(message.find(kv_cache_type_name(type)), std::string::npos) << message;
    EXPECT_NE(message.find("head_dim is 40"), std::string::npos) << message;
    EXPECT_NE(message.find("value"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(KvCache(1, 1, 40, 8, {DType::BF16, DType::F16}));
}

}  // namespace
}  // namespace deferkv
