// The behavior_preserving press on random models: generation-time compression against a
// dense-masked reference, composition, what it keeps compared with a random choice, and
// bad parameters. (The invariants every press shares are in press_end_to_end_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using Positions = std::vector<std::vector<std::vector<int32_t>>>;  // [layer][g][i]

constexpr int64_t kPrompt = 150;

Positions positions_of(const KvCache& kv) {
  Positions out(static_cast<size_t>(kv.n_layer()));
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t g = 0; g < kv.n_head_kv(); ++g) out[l].emplace_back(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
  }
  return out;
}

double kl_of_logits(const std::vector<double>& full, const std::vector<double>& other) {
  const double max_a = *std::max_element(full.begin(), full.end()), max_b = *std::max_element(other.begin(), other.end());
  double za = 0, zb = 0;
  for (size_t v = 0; v < full.size(); ++v) za += std::exp(full[v] - max_a), zb += std::exp(other[v] - max_b);
  double kl = 0;
  for (size_t v = 0; v < full.size(); ++v) {
    const double log_p = full[v] - max_a - std::log(za), log_q = other[v] - max_b - std::log(zb);
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return kl;
}

TEST(BehaviorPreserving, GenerationTimeModeMatchesADenseMaskedReference) {
  const auto model = Model::load(testing::press_test_model_path());
  SessionOptions options;
  options.n_ctx = 512;
  options.n_batch = 48;
  options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
  Session session(model, std::make_shared<ThreadPool>(2), options);
  session.set_press(make_press("behavior_preserving:window=4,sinks=2,queries=2,every=3", KvBudget::per_head(24)));
  const auto prompt = testing::random_prompt(kPrompt, 17);
  session.prefill(prompt);
  // before[s]: the cache decode step s reads (its own token is added to it).
  std::vector<Positions> before = {positions_of(kv_cache_of(session))};
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens = prompt;
  const int64_t n_vocab = model->config().n_vocab;
  constexpr int kSteps = 9;
  for (int s = 1; s <= kSteps; ++s) {
    const float* l = session.last_logits();
    logits.emplace_back(l, l + n_vocab);
    tokens.push_back(static_cast<int32_t>(std::max_element(l, l + n_vocab) - l));
    session.decode(tokens.back());
    before.push_back(positions_of(kv_cache_of(session)));
    for (const auto& layer : before.back()) {
      for (const auto& head : layer) {
        if (s % 3 == 0) EXPECT_EQ(head.size(), 24u) << "step " << s;  // cut back to b, generated entries included
        EXPECT_TRUE(std::binary_search(head.begin(), head.end(), 0) && std::binary_search(head.begin(), head.end(), 1));
        EXPECT_TRUE(std::binary_search(head.begin(), head.end(), static_cast<int32_t>(kPrompt + s - 1)));
      }
    }
  }
  // The newest entries took the place of prompt entries.
  const auto& last = before.back()[0][0];
  EXPECT_LT(std::lower_bound(last.begin(), last.end(), kPrompt) - last.begin(), 24 - 4);
  const auto reference = testing::reference_logits(
      testing::press_test_model_path(), tokens, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
        if (query < kPrompt || key == query) return true;
        const auto& kept = before[query - kPrompt][l][g];
        return std::binary_search(kept.begin(), kept.end(), static_cast<int32_t>(key));
      });
  for (size_t s = 0; s < logits.size(); ++s) {
    EXPECT_LT(testing::relative_l2(logits[s].data(), reference[kPrompt - 1 + s]), 1e-4) << "step " << s;
  }
}

TEST(BehaviorPreserving, ComposesWithADecodeTimePress) {
  const auto prompt = testing::random_prompt(kPrompt, 5);
  const auto alone = testing::run_press("behavior_preserving:window=8", KvBudget::per_head(40), prompt, 6);
  const auto composed =
      testing::run_press("behavior_preserving:window=8+moment_kv:decode_budget=3", KvBudget::per_head(40), prompt, 6);
  for (size_t l = 0; l < alone.positions.size(); ++l) {
    for (size_t g = 0; g < alone.positions[l].size(); ++g) {
      const auto& a = alone.positions[l][g];
      const auto& c = composed.positions[l][g];
      const auto prompt_end = [](const std::vector<int32_t>& p) { return std::lower_bound(p.begin(), p.end(), kPrompt); };
      EXPECT_TRUE(std::equal(a.begin(), prompt_end(a), c.begin(), prompt_end(c))) << l << " " << g;
      EXPECT_EQ(c.end() - prompt_end(c), 3);
    }
  }
  EXPECT_EQ(alone.generated.front(), composed.generated.front());
}

TEST(BehaviorPreserving, KeepsTheNextTokenDistributionBetterThanRandomOrRankedChoices) {
  const auto prompt = testing::random_prompt(kPrompt, 23);
  const auto run = testing::run_press("behavior_preserving:window=8", KvBudget::per_head(32), prompt, 0);
  for (const auto& layer : run.positions) {
    for (const auto& head : layer) {
      for (int32_t sink : {0, 1, 2, 3}) EXPECT_TRUE(std::binary_search(head.begin(), head.end(), sink)) << sink;
    }
  }
  // A random choice of as many entries per head, with the same protected ones.
  std::mt19937 rng(1);
  Positions random = run.positions;
  for (auto& layer : random) {
    for (auto& head : layer) {
      std::vector<int32_t> evictable;
      for (int32_t p = 4; p < kPrompt - 8; ++p) evictable.push_back(p);
      std::shuffle(evictable.begin(), evictable.end(), rng);
      evictable.resize(head.size() - 12);  // as many as were chosen besides sinks and window
      head = evictable;
      for (int32_t p : {0, 1, 2, 3}) head.push_back(p);
      for (int32_t p = kPrompt - 8; p < kPrompt; ++p) head.push_back(p);
      std::sort(head.begin(), head.end());
    }
  }
  // The divergence at the reference query (the prompt's last position) had it read only
  // the kept entries.
  const auto path = testing::press_test_model_path();
  const auto full = testing::reference_logits(path, prompt)[kPrompt - 1];
  auto kl_keeping = [&](const Positions& kept) {
    return kl_of_logits(full, testing::reference_logits(path, prompt, [&](int64_t l, int64_t g, int64_t key, int64_t q) {
                                return q < kPrompt - 1 || std::binary_search(kept[l][g].begin(), kept[l][g].end(),
                                                                              static_cast<int32_t>(key));
                              })[kPrompt - 1]);
  };
  const double chosen = kl_keeping(run.positions), by_chance = kl_keeping(random);
  EXPECT_LT(chosen, 0.5 * by_chance) << chosen << " vs " << by_chance;
  // The greedy on marginals against one block of the whole quota (the singleton ranking):
  // deletions chosen apart add up (measured 3-10x worse on this model).
  const auto ranked = testing::run_press("behavior_preserving:window=8,min_steps=1,block=1000", KvBudget::per_head(32),
                                         prompt, 0);
  const double by_ranking = kl_keeping(ranked.positions);
  EXPECT_LT(chosen, 0.5 * by_ranking) << chosen << " vs " << by_ranking;
}

TEST(BehaviorPreserving, RunsOnATiedQuantisedModel) {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 2;
  spec.n_ff = 64;
  spec.weight_type = DType::Q8_0;
  spec.tied_output = true;
  const auto model = Model::load(testing::random_model_path(spec));
  Session session(model, std::make_shared<ThreadPool>(2), {});
  session.set_press(make_press("behavior_preserving:window=8", KvBudget::per_head(20)));
  session.prefill(testing::random_prompt(60, 8));
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t g = 0; g < 2; ++g) EXPECT_EQ(kv_cache_of(session).length(l, g), 20);
  }
}

TEST(BehaviorPreserving, BadParametersAreClearErrors) {
  EXPECT_NE(testing::press_error("behavior_preserving:top_k=0").find("top_k=0 is out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:queries=0").find("queries=0 is out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:pool=0.5").find("pool=0.5 is out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:block=0").find("block=0 is out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:every=-1").find("every=-1 is out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:flexible=maybe").find("not a boolean"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving:sinks=x").find("sinks=x is not an integer"), std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving", KvBudget::per_head(30))
                .find("smaller than the 36 protected entries (window=32 + sinks=4)"),
            std::string::npos);
  EXPECT_NE(testing::press_error("behavior_preserving", KvBudget()).find("needs a KV budget"), std::string::npos);
}

}  // namespace
}  // namespace deferkv
