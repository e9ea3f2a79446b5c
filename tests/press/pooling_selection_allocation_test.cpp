// Hand-computed cases for the press building blocks: pooling, selection, allocation.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

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

TEST(Selection, TopKIsTheBestByScoreThenIndexForEveryCount) {
  // Against a full sort, for every k: the few-dropped scan (k near n) and the selection
  // must both give the k best, ties to the earlier index, and outside_top_k the rest.
  // Scores from a few values, so most of them tie; also in rising and falling order, as a
  // sliding window's recency scores are, where the scan passes whole blocks over.
  std::mt19937 rng(11);
  for (int64_t n : {1, 2, 17, 40, 300, 1000}) {
    for (int order : {0, 1, -1}) {
      std::vector<float> s(static_cast<size_t>(n));
      for (float& x : s) x = static_cast<float>(std::uniform_int_distribution<int>(0, 5)(rng));
      if (order == 1) std::sort(s.begin(), s.end());
      if (order == -1) std::sort(s.rbegin(), s.rend());
      std::vector<int32_t> by_rank = index_range(0, n);
      std::sort(by_rank.begin(), by_rank.end(),
                [&](int32_t a, int32_t b) { return s[a] != s[b] ? s[a] > s[b] : a < b; });
      for (int64_t k = 0; k <= n; ++k) {
        std::vector<int32_t> want(by_rank.begin(), by_rank.begin() + k);
        std::sort(want.begin(), want.end());
        ASSERT_EQ(top_k(s, k), want) << "n " << n << " k " << k << " order " << order;
        ASSERT_EQ(outside_top_k(s, k), complement(want, n)) << "n " << n << " k " << k << " order " << order;
      }
    }
  }
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
  EXPECT_EQ(complement({0, 2, 5}, 6), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(complement({}, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_THROW(complement({2, 1}, 6), Error);
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
  EXPECT_EQ(adakv_head_budgets(head_scores(s), 2, 0.5), (std::vector<int64_t>{2, 2}));
  // alpha 0: pure flattened top-k -> {1, 3}.
  EXPECT_EQ(adakv_head_budgets(head_scores(s), 2, 0.0), (std::vector<int64_t>{1, 3}));
  // alpha 1: uniform.
  EXPECT_EQ(adakv_head_budgets(head_scores(s), 2, 1.0), (std::vector<int64_t>{2, 2}));
  // alpha 0.2 with base 3: winners 0.9, .3, .3, .3, .1, .01(h0) -> won {2, 4}; floor
  // int(0.6) = 0; shares 1.6 and 3.2 -> sum 4.8 -> 5: {2, 3}.
  EXPECT_EQ(adakv_head_budgets(head_scores(s), 3, 0.2), (std::vector<int64_t>{2, 3}));
}

TEST(Allocation, PyramidReferenceRoundingFloorsTheStepAndCanExceedTheTotal) {
  // L = 4, base 40, beta 20: min 2, max 78, (max - min) / (L - 1) = 25.33.
  // exact: shares 78, 52.67, 27.33, 2 -> largest remainders to the total 160: 78, 53, 27, 2.
  // reference: step 76 // 3 = 25 -> 78, 53, 28, 3 = 162 > 160.
  EXPECT_EQ(pyramid_layer_budgets(40, 128, 4, 20, PyramidRounding::kExact), (std::vector<int64_t>{78, 53, 27, 2}));
  EXPECT_EQ(pyramid_layer_budgets(40, 128, 4, 20, PyramidRounding::kReference), (std::vector<int64_t>{78, 53, 28, 3}));
  // A step that divides: base 39, beta 13: min 3, max 75, step 72 / 3 = 24; both give 75, 51, 27, 3 (= 4 * 39).
  for (const auto rounding : {PyramidRounding::kExact, PyramidRounding::kReference}) {
    EXPECT_EQ(pyramid_layer_budgets(39, 128, 4, 13, rounding), (std::vector<int64_t>{75, 51, 27, 3}));
  }
  // b = 128, w = 8, L = 32 (docs/methods/pyramidkv.md): the reference keeps 4016 = 3840 + 4.6 %.
  const auto reference = pyramid_layer_budgets(120, 100000, 32, 20, PyramidRounding::kReference);
  EXPECT_EQ(std::accumulate(reference.begin(), reference.end(), int64_t{0}), 4016);
}

// One layer of two heads with 10 candidates each, average base 4.
LayerShare two_heads(int64_t layer, int64_t n_layer) { return {layer, n_layer, 4, 12, 8, {10, 10}, 0}; }

TEST(Allocation, EveryRuleThroughAllocate) {
  const std::vector<std::vector<float>> s = {{0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f},
                                             {0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f}};
  AllocationRule rule;
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{4, 4}));
  // Skipped layers keep every candidate.
  rule.skip_layers = 1;
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(allocate(rule, two_heads(1, 2), head_scores(s)), (std::vector<int64_t>{4, 4}));
  rule.skip_layers = 0;
  // Pyramid over 2 layers, base 4, beta 20: min 0, max 8 -> 8, 0.
  rule.kind = AllocationKind::kPyramid;
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(allocate(rule, two_heads(1, 2), head_scores(s)), (std::vector<int64_t>{0, 0}));
  // AdaKV, alpha 0: the 8 best of both heads are head 0's five, then head 1's first three
  // (0.2 > 0.01) -> {5, 3}.
  rule.kind = AllocationKind::kAdaKv;
  rule.alpha = 0.0;
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{5, 3}));
  // Ada-pyramid: layer 0's pyramid budget 8 per head, 16 winners: head 0's five, head
  // 1's ten, then head 0's first 0.01 -> {6, 10}.
  rule.kind = AllocationKind::kAdaPyramid;
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{6, 10}));
  // Calibrated, b = 12 (window and sinks 8 of it), 2 layers with u = 0.75, 0.25: floor
  // min(32, 12) = 12 for both, so 12 each (the floor binds) -> 12 - 8 = 4 candidates.
  rule.kind = AllocationKind::kCalibrated;
  rule.layer_scores = {0.75, 0.25};
  EXPECT_EQ(allocate(rule, two_heads(0, 2), head_scores(s)), (std::vector<int64_t>{4, 4}));
  // A profile of another depth is refused.
  rule.layer_scores = {1.0};
  EXPECT_THROW(allocate(rule, two_heads(0, 2), head_scores(s)), Error);
}

TEST(Allocation, CalibratedLayerBudgetsFollowTheErrorScores) {
  // b = 100, L = 2, u = 0.75, 0.25: floor 32, 32 + round(0.75 * 136) = 134, 32 + 34 = 66 (sum 200).
  AllocationRule rule;
  rule.kind = AllocationKind::kCalibrated;
  rule.layer_scores = {0.75, 0.25};
  const LayerShare layer0{0, 2, 92, 100, 8, {150, 150}, 0}, layer1{1, 2, 92, 100, 8, {150, 150}, 0};
  const std::vector<std::vector<float>> s(2, std::vector<float>(150, 0.0f));
  EXPECT_EQ(allocate(rule, layer0, head_scores(s)), (std::vector<int64_t>{126, 126}));
  EXPECT_EQ(allocate(rule, layer1, head_scores(s)), (std::vector<int64_t>{58, 58}));
}

TEST(Selection, LayerSelectorDropsAllButTheTopKPerHeadOrSharedChunks) {
  const std::vector<std::vector<float>> s = {{0.1f, 0.9f, 0.8f, 0.1f, 0.1f, 0.7f}, {0.5f, 0.1f, 0.1f, 0.1f, 0.1f, 0.9f}};
  LayerSelector per_head(Selection{});
  // Keeps {1, 2} and {5}.
  EXPECT_EQ(per_head.dropped(0, head_scores(s), {2, 1}), (std::vector<std::vector<int32_t>>{{0, 3, 4, 5}, {0, 1, 2, 3, 4}}));
  // Chunks of 2 over the heads' sums {0.6, 1.0, 0.9, 0.2, 0.2, 1.6}: chunk means 0.8,
  // 0.55, 0.9 -> the best 4 / 2 = 2 chunks are {4, 5} and {0, 1}, kept by both heads.
  LayerSelector chunks(Selection{0, 2, 2});
  const std::vector<std::vector<int32_t>> both = {{2, 3}, {2, 3}};
  EXPECT_EQ(chunks.dropped(0, head_scores(s), {4, 4}), both);
  // reuse 2: layer 1 takes layer 0's choice whatever its scores.
  const std::vector<std::vector<float>> flat = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  EXPECT_EQ(chunks.dropped(1, head_scores(flat), {4, 4}), both);
  EXPECT_THROW(chunks.dropped(2, head_scores(s), {4, 2}), Error);  // chunks need one count for every head
}

}  // namespace
}  // namespace deferkv
