// DeferKV's temporal weighting on hand-computed cases.
#include "press/methods/deferkv/temporal_fusion.h"

#include <gtest/gtest.h>

namespace deferkv {
namespace {

TEST(TemporalFusion, BlockModeDefaultsGiveFortyOnePercentToThePrompt) {
  // d = 1, eta = 0.7, w = 4: window weights 0.7 / 4, decode 1, Z = 1.7.
  const auto f = TemporalFusion::make(4, 1, 0.7, false, true);
  for (float w : f.window_weights) EXPECT_FLOAT_EQ(w, 0.175f);
  ASSERT_EQ(f.decode_weights.size(), 1u);
  EXPECT_FLOAT_EQ(f.decode_weights[0], 1.0f);
  EXPECT_FLOAT_EQ(f.normaliser, 1.7f);
  // Prompt attention (already window-weighted) 0.7 * S_P with S_P = {0.5, 0.1}; S_1 = {0.1, 0.8}.
  const std::vector<float> prompt = {0.35f, 0.07f}, s1 = {0.1f, 0.8f};
  const auto fused = f.fuse(prompt, {&s1}, 2);
  EXPECT_FLOAT_EQ(fused[0], (0.35f + 0.1f) / 1.7f);
  EXPECT_FLOAT_EQ(fused[1], (0.07f + 0.8f) / 1.7f);
}

TEST(TemporalFusion, BlockModeWithDelayTwo) {
  // d = 2: eta^2 for the window, eta for step 1, 1 for step 2; Z = 0.49 + 0.7 + 1.
  const auto f = TemporalFusion::make(2, 2, 0.7, false, true);
  EXPECT_FLOAT_EQ(f.window_weights[0], 0.49f / 2);
  EXPECT_EQ(f.decode_weights, (std::vector<float>{0.7f, 1.0f}));
  EXPECT_FLOAT_EQ(f.normaliser, 2.19f);
}

TEST(TemporalFusion, PerQueryModeDiscountsEachQuery) {
  // w = 3, d = 1: window ages 3, 2, 1 -> eta^3, eta^2, eta; step 1 -> 1.
  const auto f = TemporalFusion::make(3, 1, 0.5, true, true);
  EXPECT_EQ(f.window_weights, (std::vector<float>{0.125f, 0.25f, 0.5f}));
  EXPECT_FLOAT_EQ(f.normaliser, 1.875f);
}

TEST(TemporalFusion, WithoutDecodeFeedbackTheScoreIsTheBasesWindowMean) {
  const auto f = TemporalFusion::make(4, 3, 0.7, false, false);
  EXPECT_TRUE(f.decode_weights.empty());
  for (float w : f.window_weights) EXPECT_FLOAT_EQ(w, 0.25f);
  EXPECT_FLOAT_EQ(f.normaliser, 1.0f);
  const std::vector<float> prompt = {0.3f, 0.2f, 0.9f};
  EXPECT_EQ(f.fuse(prompt, {}, 2), (std::vector<float>{0.3f, 0.2f}));
}

TEST(TemporalFusion, WithoutTemporalWeightingEveryObservationCountsTheSame) {
  // eta = 1 (the ablation): window as a block weighs 1, each decode step 1.
  const auto f = TemporalFusion::make(8, 2, 1.0, false, true);
  EXPECT_FLOAT_EQ(f.window_weights[0], 1.0f / 8);
  EXPECT_EQ(f.decode_weights, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(f.normaliser, 3.0f);
}

}  // namespace
}  // namespace deferkv
