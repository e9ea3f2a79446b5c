#pragma once
// The list of press methods. Each method file under methods/ defines one function
// returning its PressMethod; registry.cpp lists them.
#include <memory>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

// The extra forward passes a press scores with (a prefill has room for one such protocol).
enum class ExtraForward {
  kNone,
  kLookahead,  // greedy decode steps on a compressed copy (LAQ)
  kDraft,      // a draft model's continuation fed after the prompt (SpecKV)
  kRows,       // learned rows fed after the prompt (LookaheadKV)
};
// "lookahead", "draft", "rows" ("" for kNone), as the errors name them.
const char* extra_forward_name(ExtraForward extra);

// What a press does that decides whether it composes with another (the rules: make_press
// in deferkv/press.h; checked in composed_press.cpp).
struct PressRole {
  bool evicts_prompt = true;      // it evicts prompt entries
  bool evicts_generated = false;  // it evicts generated entries
  ExtraForward extra_forward = ExtraForward::kNone;
  // It finds what to keep from the entries the cache holds when it evicts (their
  // positions, or scores matched to them by position), so an earlier press's eviction
  // cannot mislead it.
  bool reads_the_cache_as_it_is = false;
  // It evicts once, at the end of the prefill (not at decode step d, nor while decoding).
  bool evicts_at_prefill_end_only = true;
};

// The role of most methods: one eviction of the prompt's entries, at the end of the prefill.
PressRole prompt_press_role(const PressParams& params);

// Whether a press built from `spec` (a valid one) needs a draft model (ExtraForward::kDraft:
// speckv): a session without one refuses its prefill.
bool press_needs_draft_model(const std::string& spec);

struct PressMethod {
  PressInfo info;
  std::unique_ptr<Press> (*make)(const PressParams& params, const KvBudget& budget);
  PressRole (*role)(const PressParams& params) = prompt_press_role;
};

PressMethod full_method();
PressMethod streaming_llm_method();
PressMethod h2o_method();
PressMethod tova_method();
PressMethod knorm_method();
PressMethod keydiff_method();
PressMethod random_method();
PressMethod lagkv_method();
PressMethod expected_attention_method();
PressMethod snapkv_method();
PressMethod pyramidkv_method();
PressMethod adakv_method();
PressMethod chunkkv_method();
PressMethod deferkv_method();
PressMethod moment_kv_method();
PressMethod laq_method();
PressMethod laqpp_method();
PressMethod speckv_method();
PressMethod compresskv_method();
PressMethod lookaheadkv_method();
PressMethod behavior_preserving_method();

}  // namespace deferkv
