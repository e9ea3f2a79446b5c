#pragma once
// Running a press on a small random model, for the end-to-end press tests.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deferkv/press.h"
#include "deferkv/session.h"
#include "model/test_models.h"

namespace deferkv::testing {

// A 3-layer GQA model (4 query heads, 2 KV heads, head_dim 32: one quantised block, so
// every KV-cache type can store it), F32.
std::string press_test_model_path();

// The message of the error make_press gives for `spec`; "" when the press builds.
std::string press_error(const std::string& spec, const KvBudget& budget = KvBudget::per_head(64));

// Random token ids (fixed seed) of the given length.
std::vector<int32_t> random_prompt(int64_t length, uint32_t seed = 3);

struct PressRun {
  std::vector<int32_t> generated;            // greedy, y_1 first
  std::vector<std::vector<float>> logits;    // logits after prefill, then after each decode step
  // Positions kept per (layer, KV head) at the end, and the full session's keys by position.
  std::vector<std::vector<std::vector<int32_t>>> positions;  // [layer][g][i]
  std::unique_ptr<Session> session;
};

// Greedy: prefill the prompt, then n_decode decode steps. spec "full" runs without a press;
// "{lookahead_weights}" in a spec stands for press_test_lookahead_weights_path(). The KV
// cache stores keys and values as `cache_type` (f32 unless asked: exact references).
PressRun run_press(const std::string& spec, const KvBudget& budget, const std::vector<int32_t>& prompt,
                   int64_t n_decode, const std::string& cache_type = "f32");
// The same on the model at model_path.
PressRun run_press_on_model(const std::string& model_path, const std::string& spec, const KvBudget& budget,
                            const std::vector<int32_t>& prompt, int64_t n_decode, const std::string& cache_type = "f32");
// The same with the prompt given as a context and its question, fed by deferkv::prefill_prompt
// question-aware or question-agnostic.
PressRun run_press_with_question(const std::string& model_path, const std::string& spec, const KvBudget& budget,
                                 const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                                 bool question_agnostic, int64_t n_decode);

// The cache types every press test runs on: f32, the default f16, and q8_0.
const std::vector<std::string>& press_test_cache_types();

// How many (layer, KV head) pairs keep different positions in the two runs.
int64_t differing_heads(const PressRun& a, const PressRun& b);

// Driving a press by hand as a session does (deferkv/press.h, PressPoint): each calls the
// press at the points it declared, and only those.
// A prefill of n_tokens at first_position begins (kPromptBegin).
void press_prompt_begins(Press& press, KvCache& cache, int64_t first_position, int64_t n_tokens);
// The whole prompt has run: every layer's end in order (kPromptLayerEnd), then kPromptEnd.
void press_prompt_ends(Press& press, KvCache& cache);
// Decode step `step` has run: every layer's end in order (kDecodeLayerEnd), then kDecodeStep.
void press_decode_step_ends(Press& press, KvCache& cache, int64_t step);

}  // namespace deferkv::testing
