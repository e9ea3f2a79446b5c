// The attention kernel over keys and values stored in each KV-cache type, against a
// double-precision computation on the stored rows read back (dequantise-then-f64).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/thread_pool.h"
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

INSTANTIATE_TEST_SUITE_P(EveryType, AttentionStorage,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deferkv
