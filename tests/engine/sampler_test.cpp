#include "deferkv/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "deferkv/error.h"

namespace deferkv {
namespace {

SamplerParams plain(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  return p;
}

TEST(Sampler, GreedyTakesArgmaxAndLowestIdOnTies) {
  Sampler s(plain(0.0f));
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, 4), 1);
}

TEST(Sampler, TopKOfOneIsGreedyAtAnyTemperature) {
  SamplerParams p = plain(5.0f);
  p.top_k = 1;
  Sampler s(p);
  const float logits[] = {0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits, 3), 1);
}

TEST(Sampler, SameSeedSameDraws) {
  const float logits[] = {1.0f, 1.1f, 0.9f, 1.05f, 0.2f};
  Sampler a(plain(1.0f)), b(plain(1.0f));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(logits, 5), b.sample(logits, 5));
}

TEST(Sampler, FrequenciesFollowSoftmaxAtTemperature) {
  // logits ln(1), ln(2), ln(5) at T=1: probabilities 1/8, 2/8, 5/8.
  const float logits[] = {0.0f, std::log(2.0f), std::log(5.0f)};
  Sampler s(plain(1.0f));
  std::map<int, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits, 3)];
  EXPECT_NEAR(counts[0] / double(n), 0.125, 0.01);
  EXPECT_NEAR(counts[1] / double(n), 0.25, 0.01);
  EXPECT_NEAR(counts[2] / double(n), 0.625, 0.01);
  // At T=0.5 the odds square: 1:4:25.
  Sampler cold(plain(0.5f));
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[cold.sample(logits, 3)];
  EXPECT_NEAR(counts[2] / double(n), 25.0 / 30.0, 0.01);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  // p = 0.5, 0.3, 0.2: top-p 0.7 keeps {0, 1}; token 2 never drawn.
  const float logits[] = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplerParams p = plain(1.0f);
  p.top_p = 0.7f;
  Sampler s(p);
  std::map<int, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[s.sample(logits, 3)];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / 5000.0, 0.5 / 0.8, 0.03);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfTop) {
  // p = 0.6, 0.3, 0.1: min-p 0.2 -> threshold 0.12 drops token 2.
  const float logits[] = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplerParams p = plain(1.0f);
  p.min_p = 0.2f;
  Sampler s(p);
  for (int i = 0; i < 3000; ++i) EXPECT_NE(s.sample(logits, 3), 2);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  // Token 0 (logit 3) was seen: 3/2 = 1.5 < 2 -> token 1 wins.
  const float logits[] = {3.0f, 2.0f, -1.0f};
  s.accept(0);
  EXPECT_EQ(s.sample(logits, 3), 1);
  // Negative logits are pushed further down: -1*2 = -2 < -1.5.
  const float negative[] = {-1.0f, -1.5f};
  Sampler t(p);
  t.accept(0);
  EXPECT_EQ(t.sample(negative, 2), 1);
}

// Frequencies of `n` draws from `logits`.
std::map<int, double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<int, double> f;
  for (int i = 0; i < n; ++i) f[s.sample(logits.data(), static_cast<int64_t>(logits.size()))] += 1.0 / n;
  return f;
}

TEST(Sampler, TopKKeepsTheKLargestAndRenormalises) {
  // p = 1/8, 2/8, 5/8; top-k 2 keeps tokens 2 and 1 with 5/7 and 2/7.
  SamplerParams p = plain(1.0f);
  p.top_k = 2;
  Sampler s(p);
  auto f = frequencies(s, {0.0f, std::log(2.0f), std::log(5.0f)}, 20000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[2], 5.0 / 7.0, 0.015);
}

// The filters read probabilities at temperature 1 (llama.cpp's order); the temperature
// then reshapes what is left. Filtering after the temperature gives other sets.
TEST(Sampler, FiltersUseTemperatureOneThenTheTemperatureApplies) {
  // p = 0.6, 0.3, 0.1 at T = 1: min-p 0.2 (threshold 0.12) drops token 2. At T = 2 token 2
  // would hold 0.19 against a threshold of 0.095 and stay. Left: odds sqrt(0.6) : sqrt(0.3).
  const std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplerParams hot = plain(2.0f);
  hot.min_p = 0.2f;
  Sampler s(hot);
  auto f = frequencies(s, logits, 20000);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[0], std::sqrt(0.6) / (std::sqrt(0.6) + std::sqrt(0.3)), 0.015);
  // p = 0.5, 0.3, 0.2: top-p 0.7 keeps {0, 1} at T = 1; at T = 0.5 the odds square: 0.25 : 0.09.
  SamplerParams cold = plain(0.5f);
  cold.top_p = 0.7f;
  Sampler c(cold);
  f = frequencies(c, {std::log(0.5f), std::log(0.3f), std::log(0.2f)}, 20000);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[0], 0.25 / 0.34, 0.015);
}

TEST(Sampler, RepetitionPenaltyLooksBackRepeatLastNTokens) {
  // Token 0 (logit 3) penalised by 2 falls to 1.5, below token 3's 2.
  const float logits[] = {3.0f, 0.1f, 0.1f, 2.0f};
  for (const auto& [last_n, expected] : std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {2, 0}, {3, 3}, {64, 3}}) {
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = last_n;
    Sampler s(p);
    for (int32_t t : {0, 1, 2}) s.accept(t);  // token 0 is 3 back
    EXPECT_EQ(s.sample(logits, 4), expected) << "repeat_last_n " << last_n;
  }
}

TEST(Sampler, RejectsBadParameters) {
  SamplerParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplerParams{};
  p.min_p = 1.5f;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplerParams{};
  p.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace deferkv
