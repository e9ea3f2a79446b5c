// SpecKV: the draft path of the session, its cache, and its logits against a dense
// masked reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

constexpr int64_t kPrompt = 120;

std::unique_ptr<Session> speckv_session(const std::string& spec, int64_t budget) {
  auto model = Model::load(testing::press_test_model_path());
  SessionOptions options;
  options.n_ctx = 512;
  options.n_batch = 48;
  options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
  auto session = std::make_unique<Session>(model, std::make_shared<ThreadPool>(2), options);
  session->set_press(make_press(spec, KvBudget::per_head(budget)));
  session->set_draft_model(model);  // the model drafts for itself
  return session;
}

TEST(SpecKv, KeepsTheBudgetPlusTheRefedLastTokenAndMatchesAMaskedReference) {
  const auto prompt = testing::random_prompt(kPrompt, 31);
  auto session = speckv_session("speckv:window=8,n_draft=6", 30);
  session->prefill(prompt);
  EXPECT_EQ(session->n_past(), kPrompt);
  const KvCache& kv = kv_cache_of(*session);
  std::vector<std::vector<std::vector<int32_t>>> kept(static_cast<size_t>(kv.n_layer()));
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
      std::vector<int32_t> pos(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
      ASSERT_EQ(pos.size(), 31u);  // (b - w) chosen + T-w-1 .. T-2 + the re-fed T-1
      for (int64_t p = kPrompt - 9; p < kPrompt; ++p) EXPECT_TRUE(std::binary_search(pos.begin(), pos.end(), p));
      kept[l].push_back(pos);
    }
  }
  // The re-fed last token attends to the kept entries only, in every layer.
  const auto reference = testing::reference_logits(
      testing::press_test_model_path(), prompt, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
        if (query < kPrompt - 1 || key >= kPrompt - 1) return true;
        return std::binary_search(kept[l][g].begin(), kept[l][g].end(), static_cast<int32_t>(key));
      });
  EXPECT_LT(testing::relative_l2(session->last_logits(), reference[kPrompt - 1]), 1e-4);
  const auto dense = testing::reference_logits(testing::press_test_model_path(), prompt);
  EXPECT_GT(testing::relative_l2(session->last_logits(), dense[kPrompt - 1]), 1e-3);
}

// The prefill's forward passes and the press's work (its draft and eviction) are timed
// apart: together they take no longer than the call (eviction used to be counted in both).
TEST(SpecKv, EvictionTimeIsNotCountedAsPrefillTime) {
  const auto prompt = testing::random_prompt(kPrompt, 31);
  auto session = speckv_session("speckv:window=8,n_draft=6", 30);
  const auto start = std::chrono::steady_clock::now();
  session->prefill(prompt);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const SessionTimings& t = session->timings();
  EXPECT_GT(t.eviction_seconds, 0.0);
  EXPECT_GT(t.lookahead_seconds, 0.0);  // the draft and its rows
  EXPECT_LE(t.lookahead_seconds, t.eviction_seconds);
  EXPECT_LE(t.prefill_seconds + t.eviction_seconds, wall);
}

TEST(SpecKv, BudgetCoveringThePromptIsTheFullCacheAnswer) {
  const auto prompt = testing::random_prompt(kPrompt, 31);
  const auto full = testing::run_press("full", {}, prompt, 0);
  auto session = speckv_session("speckv:window=8", kPrompt + 1);
  session->prefill(prompt);
  const int64_t n_vocab = session->model().config().n_vocab;
  EXPECT_TRUE(std::equal(session->last_logits(), session->last_logits() + n_vocab, full.logits[0].begin()));
}

TEST(SpecKv, NeedsADraftModelWithTheSameTokenizer) {
  auto model = Model::load(testing::press_test_model_path());
  Session session(model, std::make_shared<ThreadPool>(1));
  session.set_press(make_press("speckv:window=8", KvBudget::per_head(30)));
  try {
    session.prefill(testing::random_prompt(kPrompt, 31));
    FAIL() << "no error without a draft model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a draft model"), std::string::npos) << e.what();
  }
  auto other = Model::load(std::string(DEFERKV_TEST_DATA) + "/models/llama-2-tiny-random.gguf");
  try {
    session.set_draft_model(other);
    FAIL() << "no error for a draft with another vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must share a tokenizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deferkv
