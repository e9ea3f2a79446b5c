// Hand-computed cases for the press building blocks: pooling, selection, allocation.
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "press/core/allocation.h"
#include "press/core/pooling.h"
#include "press/core/selection.h"

namespace deferkv {
namespace {

TEST(Pooling, MaxPoolIgnoresOutOfRangePositions) {
  // k = 3: out[j] = max(s[j-1], s[j], s[j+1]) over the positions that exist.
  const std::vector<float> s = {-1, -5, -2, -7, -3};
  EXPECT_EQ(pool_scores(s, Pooling::kMax, 3), (std::vector<float>{-1, -1, -2, -2, -3}));
}

TEST(Pooling, AvgPoolCountsThePaddingZeros) {
  // PyTorch avg_pool1d(count_include_pad=True): the ends are divided by k too.
  const std::vector<float> s = {3, 6, 9, 12};
  const auto out = pool_scores(s, Pooling::kAvg, 3);
  EXPECT_FLOAT_EQ(out[0], (0 + 3 + 6) / 3.0f);
  EXPECT_FLOAT_EQ(out[1], (3 + 6 + 9) / 3.0f);
  EXPECT_FLOAT_EQ(out[3], (9 + 12 + 0) / 3.0f);
  const auto wide = pool_scores({1, 1}, Pooling::kAvg, 7);
  EXPECT_FLOAT_EQ(wide[0], 2.0f / 7.0f);
}

TEST(Pooling, EvenKernelIsAnError) { EXPECT_THROW(pool_scores({1, 2}, Pooling::kMax, 4), Error); }

TEST(Selection, TopKBreaksTiesTowardsTheEarlierToken) {
  const std::vector<float> s = {0.5f, 0.9f, 0.5f, 0.1f, 0.5f};
  EXPECT_EQ(top_k(s, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(top_k(s, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(top_k(s, 0), (std::vector<int32_t>{}));
  EXPECT_EQ(top_k(s, 9), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(Selection, TopChunksScoresChunksByTheirMean) {
  // chunks of 2: {0,1} mean 0.5, {2,3} mean 2, {4} (partial) mean 1.5.
  const std::vector<float> s = {0, 1, 2, 2, 1.5f};
  EXPECT_EQ(top_chunks(s, 2, 1), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(top_chunks(s, 2, 2), (std::vector<int32_t>{2, 3, 4}));
}

TEST(Selection, MergeAndRange) {
  EXPECT_EQ(merge_indices({1, 4}, {2, 3, 4}), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(index_range(3, 6), (std::vector<int32_t>{3, 4, 5}));
}

TEST(Allocation, RoundingKeepsTheSumExact) {
  EXPECT_EQ(round_preserving_sum({1.5, 1.5, 1.0}, 4), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(round_preserving_sum({0.2, 0.7, 2.1}, 3), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Allocation, PyramidFallsLinearlyAndKeepsTheTotal) {
  // base 96, beta 20: min 96/20 = 4, max 2*96 - 4 = 188; 3 layers: 188, 96, 4.
  EXPECT_EQ(pyramid_layer_budgets(96, 1000, 3, 20), (std::vector<int64_t>{188, 96, 4}));
  // Max capped by the 150 candidates: min = 2*96 - 150 = 42 -> 150, 96, 42.
  EXPECT_EQ(pyramid_layer_budgets(96, 150, 3, 20), (std::vector<int64_t>{150, 96, 42}));
  // 32 layers, b = 128, w = 8 (docs/methods/pyramidkv.md's example): the reference keeps 4016, we keep 32 * 120.
  const auto b = pyramid_layer_budgets(120, 100000, 32, 20);
  int64_t total = 0;
  for (int64_t x : b) total += x;
  EXPECT_EQ(total, 32 * 120);
  EXPECT_EQ(b.front(), 234);
  EXPECT_GE(b.back(), 6);
  EXPECT_LE(b.back(), 7);
  EXPECT_TRUE(std::is_sorted(b.rbegin(), b.rend()));
}

TEST(Allocation, AdaKvGivesFlatHeadsMoreAndRespectsTheFloor) {
  // Head 0 concentrated (one big score), head 1 flat. base = 2 per head, 4 winners in all:
  // 0.9 (h0), then 0.3, 0.3, 0.3 (h1) -> won = {1, 3}. alpha 0.5: floor int(2 * .5) = 1;
  // shares 1 * .5 + 1 = 1.5 and 3 * .5 + 1 = 2.5 -> sum 4 -> {2, 2}: the
  // remainders tie (0.5, 0.5): the lower head rounds up first.
  const std::vector<std::vector<float>> s = {{0.9f, 0.01f, 0.01f, 0.01f}, {0.3f, 0.3f, 0.3f, 0.1f}};
  EXPECT_EQ(adakv_head_budgets(s, 2, 0.5), (std::vector<int64_t>{2, 2}));
  // alpha 0: pure flattened top-k -> {1, 3}.
  EXPECT_EQ(adakv_head_budgets(s, 2, 0.0), (std::vector<int64_t>{1, 3}));
  // alpha 1: uniform.
  EXPECT_EQ(adakv_head_budgets(s, 2, 1.0), (std::vector<int64_t>{2, 2}));
  // alpha 0.2 with base 3: winners 0.9, .3, .3, .3, .1, .01(h0) -> won {2, 4}; floor
  // int(0.6) = 0; shares 1.6 and 3.2 -> sum 4.8 -> 5: {2, 3}.
  EXPECT_EQ(adakv_head_budgets(s, 3, 0.2), (std::vector<int64_t>{2, 3}));
}

}  // namespace
}  // namespace deferkv
