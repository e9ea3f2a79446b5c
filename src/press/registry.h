#pragma once
// The list of press methods. Each method file under methods/ defines one function
// returning its PressMethod; registry.cpp lists them.
#include <functional>
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
  kReconstruction,  // the prompt repeated after itself (KVzip)
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
  // It evicts once, at decode step d, scoring with what it captured and the decode steps'
  // queries only, so it resumes from a deferred compressed context (Press::deferred_eviction).
  bool resumes_deferred = false;
};

// The role of most methods: one eviction of the prompt's entries, at the end of the prefill.
PressRole prompt_press_role(const PressParams& params);

// Whether a press built from `spec` (a valid one) needs a draft model (ExtraForward::kDraft:
// speckv): a session without one refuses its prefill.
bool press_needs_draft_model(const std::string& spec);

// Whether a press built from `spec` (a valid one) runs learned rows (ExtraForward::kRows:
// lookaheadkv), whose weights are trained for one model: found beside the model when the
// spec names none, so the press builds without them and fails only when set on a session.
bool press_runs_learned_rows(const std::string& spec);

struct PressMethod {
  PressInfo info;
  // A function, so that a method added while the program runs can hold what it needs.
  std::function<std::unique_ptr<Press>(const PressParams& params, const KvBudget& budget)> make;
  PressRole (*role)(const PressParams& params) = prompt_press_role;
};

// Methods added while the program runs, after the built-in ones: a scorer written in Python
// (python/src/python_scorer.cpp). make_press finds them by name, so every spec, composition
// and `deferkv.eval.run` takes them; press_catalogue() lists the built-in ones only. Adding
// a name added before replaces that method (a press made already keeps what it was made
// with); a built-in name, or a name with a character specs use (':', ',', '=', '+', '@',
// spaces), is an error. Thread-safe.
void add_press_method(PressMethod method);
// Forgets every added method (the Python module, at exit: while its interpreter still runs,
// as the methods hold Python objects).
void clear_added_press_methods();

PressMethod full_method();
PressMethod streaming_llm_method();
PressMethod h2o_method();
PressMethod tova_method();
PressMethod knorm_method();
PressMethod keydiff_method();
PressMethod random_method();
PressMethod lagkv_method();
PressMethod leverage_method();
PressMethod cur_method();
PressMethod non_causal_attention_method();
PressMethod compactor_method();
PressMethod criticalkv_method();
PressMethod finch_method();
PressMethod kvzip_method();
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
PressMethod qfilter_method();
PressMethod lookaheadkv_method();
PressMethod behavior_preserving_method();
PressMethod simlayerkv_method();
PressMethod duo_attention_method();

}  // namespace deferkv
