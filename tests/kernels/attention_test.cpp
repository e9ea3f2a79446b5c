// The attention kernel over keys and values stored in each KV-cache type, against a
// double-precision computation on the stored rows read back (dequantise-then-f64).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "base/thread_pool.h"
#include "kernels/kv_rows.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

constexpr int64_t kHeads = 6, kHeadsKv = 2, kDim = 64;
constexpr int64_t kGroup = kHeads / kHeadsKv;

struct StoredHead {
  std::vector<uint8_t> keys, values;   // as stored
  std::vector<float> key_rows, value_rows;  // read back as float32
  std::vector<int32_t> positions;
};

// `length` entries of random rows stored as `type`; positions with gaps (as after an eviction).
StoredHead stored_head(DType type, int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  StoredHead h;
  const int64_t row_bytes = dtype_row_bytes(type, kDim);
  h.keys.resize(static_cast<size_t>(length * row_bytes));
  h.values.resize(h.keys.size());
  h.key_rows.resize(static_cast<size_t>(length * kDim));
  h.value_rows.resize(h.key_rows.size());
  std::vector<float> x(kDim);
  for (int64_t j = 0; j < length; ++j) {
    for (auto [stored, rows] : {std::pair{&h.keys, &h.key_rows}, std::pair{&h.values, &h.value_rows}}) {
      for (float& v : x) v = normal(rng);
      quantize_row(type, x.data(), stored->data() + j * row_bytes, kDim);
      dequantize_row(type, stored->data() + j * row_bytes, rows->data() + j * kDim, kDim);
    }
    h.positions.push_back(static_cast<int32_t>(2 * j));
  }
  return h;
}

// n queries, the batch being the last n entries of each head: query i sees the entries
// before the batch and batch entries 0..i.
void check(DType type, std::vector<int64_t> lengths, int64_t n, ThreadPool& pool) {
  std::vector<StoredHead> heads;
  std::vector<KvHeadView> kv;
  for (size_t g = 0; g < lengths.size(); ++g) heads.push_back(stored_head(type, lengths[g], 11u + static_cast<uint32_t>(g)));
  for (size_t g = 0; g < lengths.size(); ++g) {
    kv.push_back({{heads[g].keys.data(), type, kDim}, {heads[g].values.data(), type, kDim}, heads[g].positions.data(),
                  lengths[g]});
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n * kHeads * kDim)), out(q.size());
  for (float& v : q) v = normal(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  AttentionScratch scratch;
  scratch.reserve(pool.size(), *std::max_element(lengths.begin(), lengths.end()));
  attention(q.data(), n, {kHeads, kHeadsKv, kDim, scale}, kv, out.data(), scratch, pool);

  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const StoredHead& head = heads[static_cast<size_t>(h / kGroup)];
      const int64_t visible = lengths[static_cast<size_t>(h / kGroup)] - n + i + 1;
      std::vector<double> p(static_cast<size_t>(visible));
      double max = -1e300, sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double s = 0;
        for (int64_t x = 0; x < kDim; ++x) s += double(q[(i * kHeads + h) * kDim + x]) * head.key_rows[j * kDim + x];
        max = std::max(max, p[j] = s * scale);
      }
      for (double& v : p) sum += (v = std::exp(v - max));
      for (int64_t x = 0; x < kDim; ++x) {
        double o = 0;
        for (int64_t j = 0; j < visible; ++j) o += p[j] / sum * head.value_rows[j * kDim + x];
        EXPECT_NEAR(out[(i * kHeads + h) * kDim + x], o, 2e-5) << "query " << i << " head " << h << " dim " << x;
      }
    }
  }
}

class AttentionStorage : public ::testing::TestWithParam<DType> {};

// 700 and 530 entries: several dequantisation tiles (16384 floats, 256 rows of 64) per head.
TEST_P(AttentionStorage, DecodeMatchesDoublePrecisionOnTheStoredRows) {
  ThreadPool pool(2);
  check(GetParam(), {700, 530}, 1, pool);
}

TEST_P(AttentionStorage, PrefillBlockMatchesDoublePrecisionOnTheStoredRows) {
  ThreadPool pool(2);
  check(GetParam(), {600, 600}, 40, pool);  // two query blocks of the kernel, the second partial
}

// The two products on their own, for every row count of the fused fp16 / bf16 kernels
// (1..kFusedKvRows: each its own instantiation) and one past them (the tile path), with a
// row width that leaves a tail past the whole vectors (68) and one that does not (64), and
// a number of keys that leaves a remainder past the kernels' blocks of keys.
TEST(KvRowProducts, EveryRowCountMatchesDoublePrecisionOnTheStoredRows) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  constexpr int64_t kWidth = 37, kStart = 3;  // keys [kStart, kStart + kWidth) of the stored rows
  for (DType type : {DType::F16, DType::BF16}) {
    for (int64_t d : {64, 76}) {
      const int64_t n_rows = kStart + kWidth;
      std::vector<uint8_t> stored(static_cast<size_t>(n_rows * dtype_row_bytes(type, d)));
      std::vector<float> x(static_cast<size_t>(n_rows * d)), back(x.size());
      for (float& v : x) v = normal(rng);
      quantize_row(type, x.data(), stored.data(), n_rows * d);
      dequantize_row(type, stored.data(), back.data(), n_rows * d);
      const KvRows rows{stored.data(), type, d};
      std::vector<float> tile(kKvTileFloats);
      for (int64_t r = 1; r <= kFusedKvRows + 1; ++r) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " d=" + std::to_string(d) + " rows=" + std::to_string(r));
        std::vector<float> q(static_cast<size_t>(r * (d + 5)));  // a leading dimension wider than d
        for (float& v : q) v = normal(rng);
        std::vector<float> scores(static_cast<size_t>(r * (kWidth + 2)), -1.0f);
        kv_key_scores(q.data(), d + 5, r, rows, kStart, kWidth, scores.data(), kWidth + 2, tile.data());
        std::vector<float> probs(static_cast<size_t>(r * kWidth));
        for (float& v : probs) v = uniform(rng);
        std::vector<float> out(static_cast<size_t>(r * (d + 3)), -1.0f);
        kv_weighted_values(probs.data(), kWidth, r, KvRows{stored.data() + kStart * dtype_row_bytes(type, d), type, d},
                           kWidth, out.data(), d + 3, tile.data());
        for (int64_t i = 0; i < r; ++i) {
          for (int64_t j = 0; j < kWidth; ++j) {
            double s = 0;
            for (int64_t k = 0; k < d; ++k) s += double(q[i * (d + 5) + k]) * back[(kStart + j) * d + k];
            ASSERT_NEAR(scores[i * (kWidth + 2) + j], s, 1e-4) << "row " << i << " key " << j;
          }
          EXPECT_EQ(scores[i * (kWidth + 2) + kWidth], -1.0f) << "wrote past the keys";
          for (int64_t k = 0; k < d; ++k) {
            double o = 0;
            for (int64_t j = 0; j < kWidth; ++j) o += double(probs[i * kWidth + j]) * back[(kStart + j) * d + k];
            ASSERT_NEAR(out[i * (d + 3) + k], o, 1e-4) << "row " << i << " dim " << k;
          }
          EXPECT_EQ(out[i * (d + 3) + d], -1.0f) << "wrote past the row";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, AttentionStorage,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deferkv
