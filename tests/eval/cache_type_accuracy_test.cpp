// The KL divergence of next-token distributions with each KV-cache type against f32.
#include "eval/analysis/cache_type_accuracy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "press/press_test_util.h"

namespace deferkv::eval {
namespace {

TEST(CacheTypeAccuracy, KlOfLogitsAsByHand) {
  // p = softmax(0, ln 3) = (1/4, 3/4), q uniform: KL = 1/4 ln(1/2) + 3/4 ln(3/2).
  const float p[] = {0.0f, std::log(3.0f)}, q[] = {5.0f, 5.0f};
  EXPECT_NEAR(kl_of_logits(p, q, 2), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
  EXPECT_EQ(kl_of_logits(p, p, 2), 0.0);
}

// The coarser the type's rounding, the further the predictions move: f32 not at all,
// f16 (2^-11 per value) far less than q8_0 (steps of absmax/127), q8_0 less than q4_0
// (steps of absmax/8). The random model's logits are flat, so the values are small.
TEST(CacheTypeAccuracy, OrderedByTheTypesRounding) {
  const auto model = Model::load(testing::press_test_model_path());  // head_dim 32
  const auto results = measure_cache_type_accuracy(model, std::make_shared<ThreadPool>(2), testing::random_prompt(200),
                                                   {{"f32", "f32"}, {"f16", "f16"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"},
                                                    {"q8_0", "f32"}, {"f32", "q8_0"}},
                                                   64, 48);
  ASSERT_EQ(results.size(), 6u);
  for (const auto& r : results) EXPECT_EQ(r.positions, 200 - 64);
  EXPECT_EQ(results[0].mean_kl, 0.0);
  EXPECT_GT(results[1].mean_kl, 0.0);
  EXPECT_LT(results[1].mean_kl * 10, results[2].mean_kl);
  EXPECT_LT(results[2].mean_kl * 10, results[3].mean_kl);
  EXPECT_LT(results[1].mean_kl, 1e-4);  // issue 20's target for f16
  EXPECT_LE(results[1].mean_kl, results[1].max_kl);
  // Each side's type applies on its own: either side in q8_0 moves the predictions, less
  // than both together.
  for (size_t side : {4u, 5u}) {
    EXPECT_GT(results[side].mean_kl, results[1].mean_kl) << results[side].type_k << "/" << results[side].type_v;
    EXPECT_LT(results[side].mean_kl, results[2].mean_kl) << results[side].type_k << "/" << results[side].type_v;
  }
}

}  // namespace
}  // namespace deferkv::eval
