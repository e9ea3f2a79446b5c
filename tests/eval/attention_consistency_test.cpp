// The attention-consistency diagnostics: the measures by hand, and a run on the
// embedded model.
#include "eval/analysis/attention_consistency.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "model/test_models.h"

namespace deferkv::eval {
namespace {

TEST(AttentionConsistency, JsdInBits) {
  EXPECT_DOUBLE_EQ(jsd_base2({0.2, 0.8}, {0.2, 0.8}), 0.0);
  EXPECT_DOUBLE_EQ(jsd_base2({1, 0}, {0, 1}), 1.0);
  // P = (1, 0), Q = (.5, .5), M = (.75, .25): (log2(4/3) + .5 log2(2/3) + .5) / 2.
  EXPECT_NEAR(jsd_base2({1, 0}, {0.5, 0.5}), 0.5 * (std::log2(4.0 / 3) + 0.5 * std::log2(2.0 / 3) + 0.5), 1e-12);
}

TEST(AttentionConsistency, TopBRecallOverTheCandidates) {
  // Candidates are the first 4; top-2 of p {0, 2}, of q {0, 3}: one in common.
  EXPECT_DOUBLE_EQ(top_b_recall({0.4, 0.1, 0.3, 0.1, 0.9}, {0.5, 0.1, 0.1, 0.2, 0.9}, 4, 2), 0.5);
  EXPECT_DOUBLE_EQ(top_b_recall({0.4, 0.1, 0.3}, {0.4, 0.1, 0.3}, 3, 2), 1.0);
}

TEST(AttentionConsistency, RunsOnTheEmbeddedModel) {
  auto model = Model::load(testing::stories_model_path());
  Session session(model, std::make_shared<ThreadPool>(2));
  std::string text;
  for (int i = 0; i < 6; ++i) text += "Once upon a time, Lily went to the park with her mom. She saw a big dog. ";
  const auto prompt = model->tokenizer().encode(text, true, false);
  ConsistencyOptions options;
  options.prompt_probes = 4;
  options.decode_probes = 3;
  options.reference_steps = 8;
  options.budget = 48;
  options.window = 16;
  const ConsistencyReport report = measure_attention_consistency(session, {prompt, prompt}, options);
  ASSERT_EQ(report.points.size(), 4u + 3u + 2u);
  EXPECT_EQ(report.points[0].probe, "-4");
  EXPECT_EQ(report.points[4].probe, "+1");
  EXPECT_EQ(report.points.back().probe, "deferkv");
  for (const auto& p : report.points) {
    EXPECT_GT(p.jsd_similarity, 0.0);
    EXPECT_LE(p.jsd_similarity, 1.0);
    EXPECT_GE(p.recall, 0.0);
    EXPECT_LE(p.recall, 1.0);
  }
  EXPECT_EQ(report.samples, 2);
  EXPECT_EQ(report.reference_rows, 16);
  // The analysis leaves the session without a press and usable.
  EXPECT_EQ(session.press(), nullptr);
  options.budget = 4000;
  EXPECT_THROW(measure_attention_consistency(session, {prompt}, options), Error);
}

}  // namespace
}  // namespace deferkv::eval
