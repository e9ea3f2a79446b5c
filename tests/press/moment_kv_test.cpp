// Moment-KV on a hand-computed case, and composed with a prefill press on a model.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/press.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

// One layer, one head, head_dim 2; the prompt is one token (key 0,0) at position 0.
// Step 1 feeds key (1,0) with query (3,0); step 2 key (0,1) with query (0,1).
// Scale 1/sqrt(2). Step 1: P(d1) = e^2.121 / (1 + e^2.121) = 0.893.
// Step 2: scores 0, 0, 0.707 -> P(d1) = 1/4.028 = 0.248, P(d2) = 2.028/4.028 = 0.503.
// With alpha 0.5: I(d1) = 0.5 * 0.893 + 0.248 = 0.695 > I(d2) = 0.503, so d1 stays;
// with alpha 0 only the current step counts and d2 stays.
std::vector<int32_t> kept_after_two_steps(const std::string& alpha) {
  auto press = make_press("moment_kv:decode_budget=1,alpha=" + alpha, {});
  KvCache cache(1, 1, 2, 8);
  ThreadPool pool(1);
  const Rotary rotary{2, 10000.0f, 1.0f, {}, false};
  const AttentionShape shape{1, 1, 2, 0.70710678f};
  const float prompt_key[] = {0, 0}, zero[] = {0, 0};
  int32_t position = 0;
  testing::press_prompt_begins(*press, cache, 0, 1);
  cache.append(0, prompt_key, zero, &position, 1);
  testing::press_prompt_ends(*press, cache);
  const float keys[2][2] = {{1, 0}, {0, 1}}, queries[2][2] = {{3, 0}, {0, 1}};
  for (int step = 1; step <= 2; ++step) {
    position = step;
    cache.append(0, keys[step - 1], zero, &position, 1);
    const std::vector<KvHeadView> kv = {{cache.keys(0, 0), cache.values(0, 0), cache.positions(0, 0), cache.length(0, 0)}};
    press->on_attention(AttentionEvent{0, 1, &position, queries[step - 1], shape, kv, rotary, pool});
    testing::press_decode_step_ends(*press, cache, step);
  }
  return std::vector<int32_t>(cache.positions(0, 0), cache.positions(0, 0) + cache.length(0, 0));
}

TEST(MomentKv, MomentumKeepsTheTokenWithSustainedAttention) {
  EXPECT_EQ(kept_after_two_steps("0.5"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept_after_two_steps("0"), (std::vector<int32_t>{0, 2}));
}

TEST(MomentKv, ComposedWithSnapKvBoundsBothRegions) {
  const auto prompt = testing::random_prompt(150);
  for (const std::string spec : {"snapkv:window=8+moment_kv:decode_budget=3",
                                 "deferkv:window=8,d=2+moment_kv:decode_budget=4,per_kv_head=true"}) {
    SCOPED_TRACE(spec);
    const auto run = testing::run_press(spec, KvBudget::per_head(40), prompt, 10);
    const int64_t decode_budget = spec.back() == 'e' ? 4 : 3;
    for (const auto& layer : run.positions) {
      for (const auto& head : layer) {
        const auto generated = std::count_if(head.begin(), head.end(), [](int32_t p) { return p >= 150; });
        EXPECT_EQ(generated, decode_budget);
        EXPECT_EQ(static_cast<int64_t>(head.size()) - generated, 40);  // the prompt: SnapKV's b, never touched later
        EXPECT_TRUE(std::binary_search(head.begin(), head.end(), 149));
      }
    }
    EXPECT_NE(run.session->press()->describe().find("+moment_kv:decode_budget="), std::string::npos);
  }
}

TEST(ComposedPresses, TovaAfterAHeadAdaptivePressKeepsEachHeadWithinTheBudget) {
  // AdaKV leaves the heads ragged; TOVA then chooses per head instead of sharing.
  const auto run = testing::run_press("adakv:window=8+tova:per_step=true", KvBudget::per_head(40), testing::random_prompt(150), 5);
  for (const auto& layer : run.positions) {
    for (const auto& head : layer) EXPECT_LE(static_cast<int64_t>(head.size()), 40);
  }
}

TEST(MomentKv, AloneNeedsNoBudgetAndNeverEvictsThePrompt) {
  const auto prompt = testing::random_prompt(100);
  const auto run = testing::run_press("moment_kv:decode_budget=2", {}, prompt, 6);
  for (const auto& layer : run.positions) {
    for (const auto& head : layer) {
      ASSERT_EQ(head.size(), 102u);
      EXPECT_EQ(head[99], 99);
    }
  }
  EXPECT_THROW(make_press("snapkv+moment_kv", {}), Error);
}

}  // namespace
}  // namespace deferkv
