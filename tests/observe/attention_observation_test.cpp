// The attention-capture kernel against a direct double-precision computation.
#include "observe/attention_observation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

struct Case {
  int64_t n_head, n_head_kv, head_dim;
  std::vector<int64_t> lengths;      // per KV head (ragged)
  std::vector<int32_t> query_positions;
  RowReduction rows;
  GroupReduction group;
  DType storage = DType::F32;  // how the keys are stored (a KV cache type)
};

// Entries of head g sit at positions 0, 1, ... except every third dropped in odd heads
// (ragged, like after an eviction).
std::vector<int32_t> head_positions(int64_t g, int64_t length) {
  std::vector<int32_t> p;
  for (int32_t pos = 0; static_cast<int64_t>(p.size()) < length; ++pos) {
    if (g % 2 == 1 && pos % 3 == 1) continue;
    p.push_back(pos);
  }
  return p;
}

void check(const Case& c, ThreadPool& pool) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = static_cast<int64_t>(c.query_positions.size());
  const int64_t d = c.head_dim, group = c.n_head / c.n_head_kv;
  std::vector<float> q(static_cast<size_t>(m * c.n_head * d));
  for (float& x : q) x = normal(rng);
  std::vector<std::vector<float>> keys(c.lengths.size()), values(c.lengths.size());
  std::vector<std::vector<int32_t>> positions(c.lengths.size());
  std::vector<std::vector<uint8_t>> stored(c.lengths.size());
  std::vector<KvHeadView> kv;
  for (size_t g = 0; g < c.lengths.size(); ++g) {
    keys[g].resize(static_cast<size_t>(c.lengths[g] * d));
    for (float& x : keys[g]) x = normal(rng) * 2.0f;
    values[g].resize(keys[g].size());
    positions[g] = head_positions(static_cast<int64_t>(g), c.lengths[g]);
    // The keys as stored, and the reference's keys as the stored ones read back.
    const int64_t row_bytes = dtype_row_bytes(c.storage, d);
    stored[g].resize(static_cast<size_t>(c.lengths[g] * row_bytes));
    for (int64_t j = 0; j < c.lengths[g]; ++j) {
      quantize_row(c.storage, keys[g].data() + j * d, stored[g].data() + j * row_bytes, d);
      dequantize_row(c.storage, stored[g].data() + j * row_bytes, keys[g].data() + j * d, d);
    }
    kv.push_back({{stored[g].data(), c.storage, d}, f32_rows(values[g].data(), d), positions[g].data(), c.lengths[g]});
  }
  std::vector<float> weights(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) weights[i] = 0.5f + 0.25f * static_cast<float>(i);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  std::vector<std::vector<float>> out(c.lengths.size());
  for (size_t g = 0; g < out.size(); ++g) out[g].assign(static_cast<size_t>(c.lengths[g]), 0.0f);
  const ObservedQueries observed{q.data(), c.n_head * d, c.query_positions.data(), weights.data(), m};
  observe_attention(observed, {c.n_head, c.n_head_kv, d, scale}, kv, c.rows, c.group, out, pool);

  for (int64_t g = 0; g < c.n_head_kv; ++g) {
    std::vector<double> expected(static_cast<size_t>(c.lengths[g]), 0.0);
    std::vector<std::vector<double>> per_head(static_cast<size_t>(group), std::vector<double>(expected.size(), 0.0));
    for (int64_t a = 0; a < group; ++a) {
      const int64_t h = g * group + a;
      for (int64_t i = 0; i < m; ++i) {
        std::vector<double> p(expected.size(), 0.0);
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j < c.lengths[g]; ++j) {
          if (positions[g][j] > c.query_positions[i]) continue;
          double s = 0;
          for (int64_t x = 0; x < d; ++x) s += double(q[(i * c.n_head + h) * d + x]) * keys[g][j * d + x];
          p[j] = s * scale;
          max = std::max(max, p[j]);
        }
        for (int64_t j = 0; j < c.lengths[g]; ++j) {
          if (positions[g][j] > c.query_positions[i]) continue;
          sum += (p[j] = std::exp(p[j] - max));
        }
        for (int64_t j = 0; j < c.lengths[g]; ++j) {
          const double prob = positions[g][j] > c.query_positions[i] ? 0.0 : p[j] / sum;
          per_head[a][j] = c.rows == RowReduction::kMax ? std::max(per_head[a][j], prob)
                                                        : per_head[a][j] + weights[i] * prob;
        }
      }
    }
    for (size_t j = 0; j < expected.size(); ++j) {
      double v = 0;
      for (int64_t a = 0; a < group; ++a) {
        v = c.group == GroupReduction::kMax ? std::max(v, per_head[a][j]) : v + per_head[a][j];
      }
      if (c.group == GroupReduction::kMean) v /= static_cast<double>(group);
      EXPECT_NEAR(out[g][j], v, 1e-5 + 1e-4 * v) << "head " << g << " entry " << j;
    }
  }
}

TEST(AttentionObservation, WeightedWindowRowsWithCausalityAndGqaMean) {
  ThreadPool pool(2);
  // 600 entries: three column blocks; the queries see different prefixes.
  check({8, 2, 16, {600, 600}, {560, 580, 599, 599}, RowReduction::kWeightedSum, GroupReduction::kMean}, pool);
}

TEST(AttentionObservation, ReadsKeysStoredInEveryCacheType) {
  ThreadPool pool(2);
  for (DType type : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    SCOPED_TRACE(dtype_name(type));
    check({4, 2, 64, {600, 300}, {299, 590}, RowReduction::kWeightedSum, GroupReduction::kMean, type}, pool);
  }
}

TEST(AttentionObservation, RaggedHeadsAndSumReduction) {
  ThreadPool pool(3);
  check({4, 4, 8, {300, 260, 300, 513}, {900}, RowReduction::kWeightedSum, GroupReduction::kSum}, pool);
}

TEST(AttentionObservation, MaxOverRowsAndGroup) {
  ThreadPool pool(2);
  check({6, 2, 32, {257, 257}, {200, 256, 256}, RowReduction::kMax, GroupReduction::kMax}, pool);
}

TEST(AttentionObservation, AccumulatesIntoExistingScores) {
  ThreadPool pool(1);
  std::vector<float> k = {1, 0, 0, 1}, v = k;
  std::vector<int32_t> pos = {0, 1};
  std::vector<KvHeadView> kv = {{f32_rows(k.data(), 2), f32_rows(v.data(), 2), pos.data(), 2}};
  std::vector<float> q = {0, 0};  // uniform attention: 0.5 each
  int32_t qpos = 1;
  std::vector<std::vector<float>> out = {{1.0f, 2.0f}};
  observe_attention({q.data(), 2, &qpos, nullptr, 1}, {1, 1, 2, 1.0f}, kv, RowReduction::kWeightedSum,
                    GroupReduction::kMean, out, pool);
  EXPECT_FLOAT_EQ(out[0][0], 1.5f);
  EXPECT_FLOAT_EQ(out[0][1], 2.5f);
}

}  // namespace
}  // namespace deferkv
