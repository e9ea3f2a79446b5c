// A decode step's attention keeps its probabilities for the observers (AttentionScratch::
// keep_decode_probabilities), and the capture kernel reads them instead of computing them
// again. Both must be invisible in the results: the attention's output, and every captured
// value, bit for bit the same as without (independent path: the capture's own products),
// for every cache type, ragged heads, row weights and every reduction; `from` only skips
// unwanted columns. The captured values themselves are checked against a plain softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "observe/attention_observation.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

constexpr int64_t kHeads = 6, kKvHeads = 2, kDim = 64;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class AttentionKeptProbabilitiesTest : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionKeptProbabilitiesTest, CaptureFromKeptProbabilitiesIsBitIdentical) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // 700 entries (blocks of 256 and a partial one), head 1 ragged after an eviction.
  constexpr int64_t kLength = 700;
  KvCache cache(1, kKvHeads, kDim, kLength + 1, {GetParam(), GetParam()});
  std::vector<float> k(kLength * kKvHeads * kDim), v(k.size());
  for (float& x : k) x = 2.0f * normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<int32_t> positions(kLength);
  for (int32_t i = 0; i < kLength; ++i) positions[static_cast<size_t>(i)] = i;
  cache.append(0, k.data(), v.data(), positions.data(), kLength);
  std::vector<int32_t> keep;
  for (int32_t j = 0; j < kLength; ++j) {
    if (j % 5 != 2) keep.push_back(j);
  }
  cache.retain(0, 1, keep);
  std::vector<KvHeadView> kv = {cache.view(0, 0), cache.view(0, 1)};
  std::vector<float> q(kHeads * kDim);
  for (float& x : q) x = normal(rng);
  const int32_t position = kLength;
  const AttentionShape shape{kHeads, kKvHeads, kDim, 1.0f / std::sqrt(static_cast<float>(kDim))};

  AttentionScratch plain, keeping;
  plain.reserve(pool.size(), kLength);
  keeping.reserve(pool.size(), kLength);
  keeping.keep_decode_probabilities = true;
  std::vector<float> out_plain(kHeads * kDim), out_keeping(out_plain.size());
  attention(q.data(), 1, shape, kv, out_plain.data(), plain, pool);
  attention(q.data(), 1, shape, kv, out_keeping.data(), keeping, pool);
  EXPECT_TRUE(same_bits(out_plain, out_keeping)) << "keeping the probabilities changed the attention's output";
  ASSERT_EQ(keeping.decode_probabilities.size(), 2u);
  EXPECT_EQ(keeping.decode_probabilities[1].size(), static_cast<size_t>(3 * kv[1].length));

  // The reference: each query head's softmax in double over the stored keys.
  std::vector<std::vector<double>> reference(kHeads);  // [query head][entry]
  for (int64_t h = 0; h < kHeads; ++h) {
    const KvHeadView& head = kv[static_cast<size_t>(h / 3)];
    std::vector<float> keys(static_cast<size_t>(head.length * kDim));
    head.keys.to_f32(0, head.length, keys.data());
    std::vector<double>& p = reference[static_cast<size_t>(h)];
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j < head.length; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < kDim; ++i) dot += double(q[h * kDim + i]) * keys[j * kDim + i];
      p.push_back(dot * shape.scale);
      max = std::max(max, p.back());
    }
    for (double& x : p) sum += x = std::exp(x - max);
    for (double& x : p) x /= sum;
  }

  for (const float w : {1.0f, 0.75f}) {
    for (const auto& [rows, group] : {std::pair{RowReduction::kWeightedSum, GroupReduction::kMean},
                                      std::pair{RowReduction::kMax, GroupReduction::kMax},
                                      std::pair{RowReduction::kWeightedSum, GroupReduction::kSum}}) {
      auto observe = [&](const std::vector<std::vector<float>>* probabilities, const int64_t* from,
                         float start = 0.125f) {
        std::vector<std::vector<float>> out = {std::vector<float>(static_cast<size_t>(kv[0].length), start),
                                               std::vector<float>(static_cast<size_t>(kv[1].length), start)};
        ObservedQueries observed{q.data(), kHeads * kDim, &position, &w, 1};
        observed.probabilities = probabilities;
        observed.from = from;
        observe_attention(observed, shape, kv, rows, group, out, pool);
        return out;
      };
      const auto computed = observe(nullptr, nullptr);
      const auto from_kept = observe(&keeping.decode_probabilities, nullptr);
      for (size_t g = 0; g < 2; ++g) EXPECT_TRUE(same_bits(computed[g], from_kept[g])) << "head " << g;
      const auto alone = observe(nullptr, nullptr, 0.0f);  // the values themselves
      for (size_t g = 0; g < 2; ++g) {
        for (size_t j = 0; j < alone[g].size(); ++j) {
          double expected = 0;
          for (size_t a = 0; a < 3; ++a) {
            const double p = reference[g * 3 + a][j] * (rows == RowReduction::kMax ? 1.0 : w);
            expected = group == GroupReduction::kMax ? std::max(expected, p) : expected + p;
          }
          if (group == GroupReduction::kMean) expected /= 3;
          ASSERT_NEAR(alone[g][j], expected, 2e-6 * expected + 1e-12) << "head " << g << " entry " << j;
        }
      }
      // Only the entries from 600 (head 0) and 300 (head 1) on are wanted: those are the same.
      const int64_t from[] = {600, 300};
      const auto tail = observe(&keeping.decode_probabilities, from);
      for (size_t g = 0; g < 2; ++g) {
        for (size_t j = static_cast<size_t>(from[g]); j < computed[g].size(); ++j) {
          ASSERT_EQ(std::memcmp(&tail[g][j], &computed[g][j], sizeof(float)), 0) << "head " << g << " entry " << j;
        }
      }
    }
  }
}

TEST_P(AttentionKeptProbabilitiesTest, ProbabilitiesOfAnotherCacheAreNotUsed) {
  // Kept probabilities that do not match the heads' lengths (a stale step) are ignored, not misread.
  ThreadPool pool(1);
  KvCache cache(1, 1, kDim, 8, {GetParam(), GetParam()});
  std::vector<float> k(4 * kDim, 0.5f), v(k.size(), 1.0f);
  const std::vector<int32_t> positions = {0, 1, 2, 3};
  cache.append(0, k.data(), v.data(), positions.data(), 4);
  const std::vector<KvHeadView> kv = {cache.view(0, 0)};
  const std::vector<std::vector<float>> stale = {std::vector<float>(3 * 5, 100.0f)};
  std::vector<float> q(3 * kDim, 0.1f);
  const int32_t position = 3;
  std::vector<std::vector<float>> out = {std::vector<float>(4, 0.0f)};
  ObservedQueries observed{q.data(), 3 * kDim, &position, nullptr, 1};
  observed.probabilities = &stale;
  observe_attention(observed, {3, 1, kDim, 0.125f}, kv, RowReduction::kWeightedSum, GroupReduction::kMean, out, pool);
  for (float p : out[0]) EXPECT_FLOAT_EQ(p, 0.25f);  // equal keys: uniform attention
}

INSTANTIATE_TEST_SUITE_P(F32F16Q8, AttentionKeptProbabilitiesTest, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deferkv
