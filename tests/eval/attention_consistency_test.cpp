// The attention-consistency diagnostics: the measures by hand, and a run on the
// embedded model.
#include "eval/analysis/attention_consistency.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "model/reference_forward.h"
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

// The report against the same measures on attention computed independently: the f64
// reference forward's queries and keys of the prompt and of the continuation the analysis
// decoded, softmax by hand. (Mutants checked: a window row over w - 1 prompt rows, or the
// fused row with eta on the decode step, move the "window" or "deferkv" point far past
// the tolerance.)
TEST(AttentionConsistency, EqualsTheMeasuresOnReferenceAttention) {
  const std::string path = testing::stories_model_path();
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  std::string text;
  for (int i = 0; i < 4; ++i) text += "Once upon a time, Lily went to the park with her mom. She saw a big dog. ";
  const auto prompt = model->tokenizer().encode(text, true, false);
  const auto t = static_cast<int64_t>(prompt.size());
  ConsistencyOptions o;
  o.prompt_probes = 3;
  o.decode_probes = 2;
  o.reference_steps = 4;
  o.budget = 40;
  o.window = 8;
  o.eta = 0.6;
  // f32 caches here and in the greedy run below: the reference keeps keys in double
  // precision, and the default f16 cache's rounding alone moved the decode probes'
  // similarity by 1.0-1.3e-4 on an AVX2 machine, past the tolerance below.
  SessionOptions f32_cache;
  f32_cache.cache_type_k = f32_cache.cache_type_v = "f32";
  Session session(model, std::make_shared<ThreadPool>(1), f32_cache);
  const ConsistencyReport report = measure_attention_consistency(session, {prompt}, o);
  ASSERT_EQ(report.reference_rows, o.reference_steps);

  // The greedy continuation the analysis decoded: step s's query sits at position t + s - 1.
  const int64_t last_step = o.decode_probes + o.reference_steps;
  std::vector<int32_t> tokens = prompt;
  Session greedy(model, std::make_shared<ThreadPool>(1), f32_cache);
  greedy.prefill(prompt);
  for (int64_t s = 0; s < last_step; ++s) {
    const float* logits = greedy.last_logits();
    const auto token = static_cast<int32_t>(std::max_element(logits, logits + c.n_vocab) - logits);
    ASSERT_FALSE(model->tokenizer().is_end_of_generation(token));
    tokens.push_back(token);
    greedy.decode(token);
  }
  const testing::ReferenceTrace trace = testing::reference_trace(path, tokens, testing::ReferenceRows{});
  const int64_t group = c.n_head / c.n_head_kv;
  // Position p's attention over keys 0..p in (layer, head), cut to the prompt keys, renormalised.
  auto row = [&](int64_t p, int64_t l, int64_t h) {
    const auto& q = trace.queries[l][p];
    std::vector<double> logits;
    double top = -1e300;
    for (int64_t j = 0; j <= p; ++j) {
      const auto& k = trace.keys[l][j];
      double dot = 0;
      for (int64_t d = 0; d < c.head_dim; ++d) dot += q[h * c.head_dim + d] * k[(h / group) * c.head_dim + d];
      logits.push_back(dot / std::sqrt(static_cast<double>(c.head_dim)));
      top = std::max(top, logits.back());
    }
    std::vector<double> r(static_cast<size_t>(t), 0.0);
    double total = 0;
    for (int64_t j = 0; j < std::min(p + 1, t); ++j) total += r[j] = std::exp(logits[j] - top);
    for (double& x : r) x /= total;
    return r;
  };
  const std::vector<std::string> names = {"-3", "-2", "-1", "+1", "+2", "window", "deferkv"};
  std::vector<double> jsd(names.size(), 0.0), recall(names.size(), 0.0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    for (int64_t h = 0; h < c.n_head; ++h) {
      std::vector<double> reference(static_cast<size_t>(t), 0.0);
      for (int64_t s = o.decode_probes + 1; s <= last_step; ++s) {
        const auto r = row(t + s - 1, l, h);
        for (int64_t j = 0; j < t; ++j) reference[j] += r[j] / static_cast<double>(o.reference_steps);
      }
      std::vector<std::vector<double>> probes = {row(t - 3, l, h), row(t - 2, l, h), row(t - 1, l, h), row(t, l, h),
                                                 row(t + 1, l, h)};
      std::vector<double> window(static_cast<size_t>(t), 0.0), fused(static_cast<size_t>(t));
      for (int64_t k = 1; k <= o.window; ++k) {
        const auto r = row(t - k, l, h);
        for (int64_t j = 0; j < t; ++j) window[j] += r[j] / static_cast<double>(o.window);
      }
      for (int64_t j = 0; j < t; ++j) fused[j] = (o.eta * window[j] + probes[3][j]) / (1 + o.eta);
      probes.push_back(window);
      probes.push_back(fused);
      for (size_t i = 0; i < probes.size(); ++i) {
        jsd[i] += (1 - jsd_base2(probes[i], reference)) / static_cast<double>(c.n_layer * c.n_head);
        recall[i] += top_b_recall(probes[i], reference, t - o.window, o.budget - o.window) /
                     static_cast<double>(c.n_layer * c.n_head);
      }
    }
  }
  ASSERT_EQ(report.points.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(report.points[i].probe, names[i]);
    EXPECT_NEAR(report.points[i].jsd_similarity, jsd[i], 1e-4) << names[i];
    // Top-B sets may differ where float and double scores nearly tie at the cut.
    EXPECT_NEAR(report.points[i].recall, recall[i], 0.02) << names[i];
  }
  // The measures tell the probes apart, so equal numbers above are not a coincidence.
  EXPECT_GT(std::abs(jsd[0] - jsd[4]) + std::abs(recall[0] - recall[4]), 0.01);
}

}  // namespace
}  // namespace deferkv::eval
