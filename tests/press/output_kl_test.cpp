// Behavior-preserving estimator, hand-computed cases: the per-head deletion effect
// (docs/methods/behavior_preserving.md, step 1) and the KL over top-K + rest with its second-order form.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "press/methods/behavior_preserving/layer_deletion_model.h"
#include "press/methods/behavior_preserving/output_kl.h"

namespace deferkv {
namespace {

// KL(p || q), q_k = p_k e^{dz_k} / Z over the listed tokens and a rest bucket with dz 0,
// straight from the definition.
double kl_by_definition(const std::vector<double>& p, double p_rest, const std::vector<double>& dz) {
  double z = p_rest;
  for (size_t k = 0; k < p.size(); ++k) z += p[k] * std::exp(dz[k]);
  double kl = p_rest > 0 ? p_rest * std::log(p_rest / (p_rest / z)) : 0.0;
  for (size_t k = 0; k < p.size(); ++k) kl += p[k] * std::log(p[k] / (p[k] * std::exp(dz[k]) / z));
  return kl;
}

TruncatedDistribution two_tokens() {
  TruncatedDistribution d;
  d.tokens = {0, 1};
  d.p = {0.5f, 0.3f};
  d.p_rest = 0.2;
  return d;
}

TEST(OutputKl, TruncatedDistributionKeepsTheTopKAndTheRestMass) {
  const float logits[] = {1.0f, 2.0f, 3.0f, 0.0f};
  const TruncatedDistribution d = truncate_distribution(logits, 4, 2);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1.0;
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(d.p[0], std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(d.p[1], std::exp(2.0) / z, 1e-7);
  EXPECT_NEAR(d.p_rest, (std::exp(1.0) + 1.0) / z, 1e-7);
  EXPECT_NEAR(truncate_distribution(logits, 4, 9).p_rest, 0.0, 1e-7);  // K clamped to V
}

TEST(OutputKl, HandComputedDivergenceAndItsSecondOrderForm) {
  // p = (0.5, 0.3 | rest 0.2), the first logit up by ln 2: Z = 0.5*2 + 0.3 + 0.2 = 1.5,
  // KL = -sum p dz + ln Z = ln(1.5 / sqrt 2); 1/2 Var_p(dz) = 1/2 (0.5 - 0.25) ln^2 2.
  const TruncatedDistribution d = two_tokens();
  const float dz[] = {static_cast<float>(std::log(2.0)), 0.0f};
  EXPECT_NEAR(truncated_kl(d, dz), std::log(1.5 / std::sqrt(2.0)), 1e-6);
  EXPECT_NEAR(second_order_kl(d, dz), 0.125 * std::log(2.0) * std::log(2.0), 1e-6);
  // A common shift of every logit, the rest bucket's included, changes nothing; the rest
  // bucket's logit is held fixed, so shifting only the top K does.
  const float shifted[] = {dz[0] + 0.7f, 0.7f};
  EXPECT_NEAR(truncated_kl(d, shifted), kl_by_definition({0.5, 0.3}, 0.2, {std::log(2.0) + 0.7, 0.7}), 1e-6);
  EXPECT_GT(truncated_kl(d, shifted), truncated_kl(d, dz));
}

TEST(OutputKl, SecondOrderFormIsTheLimitOfTheExactDivergence) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  TruncatedDistribution d;
  std::vector<double> p;
  d.p_rest = 1.0;
  for (int k = 0; k < 7; ++k) {
    d.tokens.push_back(k);
    d.p.push_back(0.05f + 0.02f * static_cast<float>(k));
    p.push_back(d.p.back());
    d.p_rest -= p.back();
  }
  std::vector<double> direction(7);
  for (double& u : direction) u = normal(rng);
  double previous_gap = 1.0;
  for (const double eps : {0.3, 0.1, 1e-2, 1e-3, 1e-4}) {
    SCOPED_TRACE(eps);
    std::vector<double> dz;
    std::vector<float> dz_f;
    for (double u : direction) {
      dz_f.push_back(static_cast<float>(eps * u));
      dz.push_back(dz_f.back());
    }
    const double exact = kl_by_definition(p, d.p_rest, dz);
    // The expm1 form keeps its digits even at KL ~ 1e-9.
    EXPECT_NEAR(truncated_kl(d, dz_f.data()) / exact, 1.0, 1e-4);
    const double gap = std::abs(second_order_kl(d, dz_f.data()) / exact - 1.0);
    EXPECT_LT(gap, 3.0 * eps);  // the third-order term relative to the second: O(eps)
    EXPECT_LT(gap, previous_gap);
    previous_gap = gap;
  }
}

// One query head over three entries with equal attention (query 0): v = (3,0), (0,3),
// (0,0), so o = (1,1). W_O = [[2,0],[1,1]] and G = I: the top-2 logits move by W_O do.
TEST(DeletionEffect, RenormalisesTheHeadOutputAsByHand) {
  const std::vector<float> keys(6, 0.0f), values = {3, 0, 0, 3, 0, 0}, query = {0, 0};
  const std::vector<int32_t> positions = {0, 1, 2};
  const std::vector<KvHeadView> kv = {{f32_rows(keys.data(), 2), f32_rows(values.data(), 2), positions.data(), 3}};
  const OutputSensitivity output{two_tokens(), {1, 0, 0, 1}};
  const std::vector<float> w_o = {2, 0, 1, 1};
  ThreadPool pool(1);
  LayerDeletionModel model;
  model.build({{2, query.data(), &output}}, w_o, 2, {1, 1, 2, 1.0f}, kv, {{0, 1, 2}}, pool);
  EXPECT_FLOAT_EQ(model.attention(0, 0, 0, 0), 1.0f / 3);
  // e_0 = W_O (o - v_0) = W_O (-2, 1) = (-4, -1).
  EXPECT_FLOAT_EQ(model.effect(0, 0, 0, 0)[0], -4.0f);
  EXPECT_FLOAT_EQ(model.effect(0, 0, 0, 0)[1], -1.0f);

  DeletionSet set(model);
  set.add({{0, 0}});
  // Without entry 0: o' = (v_1 + v_2) / 2 = (0, 1.5), do = (-1, 0.5), dz = W_O do = (-2, -0.5).
  EXPECT_NEAR(set.delta_z(0)[0], -2.0f, 1e-6);
  EXPECT_NEAR(set.delta_z(0)[1], -0.5f, 1e-6);
  EXPECT_NEAR(set.kl(), kl_by_definition({0.5, 0.3}, 0.2, {-2.0, -0.5}), 1e-6);
  std::vector<float> scratch;
  const double with_second = set.kl_with(0, 1, scratch);
  set.add({{0, 1}});
  // Without entries 0 and 1: o' = v_2 = (0, 0), do = (-1, -1), dz = (-2, -2).
  EXPECT_NEAR(set.delta_z(0)[0], -2.0f, 1e-6);
  EXPECT_NEAR(set.delta_z(0)[1], -2.0f, 1e-6);
  EXPECT_NEAR(set.kl(), kl_by_definition({0.5, 0.3}, 0.2, {-2.0, -2.0}), 1e-6);
  EXPECT_NEAR(with_second, set.kl(), 1e-6);
  // Singleton score of entry 2 (v = 0): do = (1/3)/(2/3) (o - 0) = (0.5, 0.5), dz = (1, 1).
  const float dz2[] = {1.0f, 1.0f};
  EXPECT_NEAR(model.singleton_scores(pool)[0][2], second_order_kl(output.distribution, dz2), 1e-6);
}

}  // namespace
}  // namespace deferkv
