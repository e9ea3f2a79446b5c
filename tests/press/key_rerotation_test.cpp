// Key re-rotation (docs/methods/key_rerotation.md), on StreamingLLM: after the prompt's
// eviction the kept entries sit at 0..n-1 with their keys rotated there, and decoding
// continues at n. Checked against the double-precision reference forward:
//  - every kept key equals the reference's key of the same entry rotated (in double, from
//    the model's RoPE definition) from its original position to its new one, and in layer 0,
//    whose keys depend on the token alone, the key a prefill of the kept tokens at 0..n-1
//    stores;
//  - on a one-layer model with every head keeping the same entries, where the compressed
//    cache then is exactly the cache of a prefill of the kept tokens, the logits of the
//    decode steps equal the reference forward over the kept tokens and the generated ones
//    at contiguous positions.
//
// Mutants applied to the engine, run, seen failing, reverted:
//   KvCache::renumber rotates by the new position, not by new - old   -> RerotatedKeys, DecodeLogits
//   continue_at never called (decoding continues at T)                -> RerotatedKeys (the
//                                                                        decoded entry's position),
//                                                                        DecodeLogits
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "deferkv/model.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

constexpr int64_t kPrompt = 48, kBudget = 20, kSinks = 4;

std::string one_layer_model() {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 1;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.head_dim = 32;
  spec.n_ff = 128;
  spec.seed = 5;
  return testing::random_model_path(spec);
}

// StreamingLLM's kept prompt positions: the sinks and the newest b - sinks.
std::vector<int32_t> kept_positions() {
  std::vector<int32_t> out;
  for (int32_t p = 0; p < kSinks; ++p) out.push_back(p);
  for (int32_t p = kPrompt - (kBudget - kSinks); p < kPrompt; ++p) out.push_back(p);
  return out;
}

// RoPE of one head in double, as the model's config defines it, moving x by `delta` positions.
void rotate(std::vector<double>& x, const ModelConfig& c, int64_t delta) {
  const int64_t half = c.n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(delta) * c.rope_linear_scale *
                         std::pow(static_cast<double>(c.rope_base), -2.0 * static_cast<double>(i) / c.n_rot);
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    double& a = interleaved ? x[2 * i] : x[i];
    double& b = interleaved ? x[2 * i + 1] : x[i + half];
    const double x0 = a, x1 = b;
    a = x0 * std::cos(theta) - x1 * std::sin(theta);
    b = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

TEST(KeyRerotation, RerotatedKeys) {
  const std::string path = testing::press_test_model_path();  // 3 layers
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt);
  const auto run = testing::run_press_on_model(path, "streaming_llm:rerotate=true", KvBudget::per_head(kBudget), prompt, 1);
  const ModelConfig& c = run.session->model().config();
  ASSERT_GT(c.n_rot, 0);
  const KvCache& kv = kv_cache_of(*run.session);
  const std::vector<int32_t> kept = kept_positions();
  const auto full = testing::reference_trace(path, prompt, testing::KeyVisibility{});
  std::vector<int32_t> kept_tokens;
  for (int32_t p : kept) kept_tokens.push_back(prompt[p]);
  const auto prefill_of_kept = testing::reference_trace(path, kept_tokens, testing::KeyVisibility{});
  const int64_t d = c.head_dim;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    for (int64_t g = 0; g < c.n_head_kv; ++g) {
      // The prompt's entries at 0..b-1, the decoded token after them at b.
      std::vector<int32_t> want_positions;
      for (int32_t p = 0; p <= kBudget; ++p) want_positions.push_back(p);
      ASSERT_EQ(run.positions[l][g], want_positions) << "layer " << l << " KV head " << g;
      KvRowReader keys(kv.keys(l, g));
      for (int64_t j = 0; j < kBudget; ++j) {
        std::vector<double> want(full.keys[l][kept[j]].begin() + g * d, full.keys[l][kept[j]].begin() + (g + 1) * d);
        rotate(want, c, j - kept[j]);
        EXPECT_LT(testing::relative_l2(keys(j), want), 1e-5) << "layer " << l << " KV head " << g << " entry " << j;
        if (l == 0) {
          const std::vector<double> prefilled(prefill_of_kept.keys[0][j].begin() + g * d,
                                              prefill_of_kept.keys[0][j].begin() + (g + 1) * d);
          EXPECT_LT(testing::relative_l2(keys(j), prefilled), 1e-5) << "KV head " << g << " entry " << j;
        }
      }
    }
  }
}

TEST(KeyRerotation, DecodeLogits) {
  const std::string path = one_layer_model();
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt, 7);
  const auto run = testing::run_press_on_model(path, "streaming_llm:rerotate=true", KvBudget::per_head(kBudget), prompt, 2);
  std::vector<int32_t> tokens;
  for (int32_t p : kept_positions()) tokens.push_back(prompt[p]);
  tokens.push_back(run.generated[0]);
  tokens.push_back(run.generated[1]);
  const auto reference = testing::reference_logits(path, tokens);
  // logits[1]: after y_1 fed at position b; logits[2]: after y_2 at b + 1.
  for (int64_t step = 1; step <= 2; ++step) {
    EXPECT_LT(testing::relative_l2(run.logits[step].data(), reference[kBudget + step - 1]), 1e-4) << "decode step " << step;
  }
  // Without re-rotation the same kept set decodes at T: other logits.
  const auto plain = testing::run_press_on_model(path, "streaming_llm", KvBudget::per_head(kBudget), prompt, 1);
  EXPECT_GT(testing::relative_l2(plain.logits[1].data(), reference[kBudget]), 1e-3);
}

TEST(KeyRerotation, QuestionAgnosticQuestionFollowsAtN) {
  // The context compressed and renumbered at its end; the question read after it at
  // b .. b + q - 1, then the answer: on the one-layer model, the logits of a forward over
  // the kept context tokens, the question and y_1 from position 0.
  constexpr int64_t kQuestion = 6;
  const std::string path = one_layer_model();
  const std::vector<int32_t> context = testing::random_prompt(kPrompt, 9);
  const std::vector<int32_t> question = testing::random_prompt(kQuestion, 13);
  const auto run = testing::run_press_with_question(path, "streaming_llm:rerotate=true", KvBudget::per_head(kBudget),
                                                    context, question, true, 1);
  std::vector<int32_t> want_positions;
  for (int32_t p = 0; p <= kBudget + kQuestion; ++p) want_positions.push_back(p);
  for (int64_t g = 0; g < 2; ++g) EXPECT_EQ(run.positions[0][g], want_positions) << "KV head " << g;
  std::vector<int32_t> tokens;
  for (int32_t p : kept_positions()) tokens.push_back(context[p]);
  tokens.insert(tokens.end(), question.begin(), question.end());
  tokens.push_back(run.generated[0]);
  const auto reference = testing::reference_logits(path, tokens);
  EXPECT_LT(testing::relative_l2(run.logits[0].data(), reference[kBudget + kQuestion - 1]), 1e-4) << "after the question";
  EXPECT_LT(testing::relative_l2(run.logits[1].data(), reference[kBudget + kQuestion]), 1e-4) << "decode step 1";
}

TEST(KeyRerotation, RefusedWhereItCannotApply) {
  for (const char* spec : {"streaming_llm:rerotate=true,per_step=true", "streaming_llm:rerotate=true,every=4",
                           "streaming_llm:rerotate=true,d=1"}) {
    EXPECT_NE(testing::press_error(spec).find("once, at the end of the prefill"), std::string::npos) << spec;
  }
  EXPECT_NE(testing::press_error("streaming_llm:rerotate=true,alloc=adakv").find("same number of entries"),
            std::string::npos);
}

}  // namespace
}  // namespace deferkv
