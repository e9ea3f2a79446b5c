#pragma once
// The base of every method's press: ScoredPress (the scorers) and the presses whose
// eviction is their own (LAQ, SpecKV, CompressKV, Behavior-Preserving, Moment-KV). They
// choose what to keep in different ways, but each needs the same bookkeeping, written once
// here: the prompt's end and the budget resolved for it, where decode step 1 starts (after
// the question in question-agnostic mode), the refusal of a budget below the entries the
// press always keeps, whether a one-shot eviction of the prompt cuts anything, and the
// session's host for its capabilities. A press adds the points it acts at to
// PromptPress's (points()) and, in act(), calls PromptPress's first, as a scorer method
// calls ScoredPress's (scored_press.h).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

// The entries a press always keeps (its window, sinks): a per-head budget must hold them.
struct ProtectedEntries {
  int64_t count = 0;
  std::string what;    // after the count in the error, e.g. "protected window entries"
  std::string shrink;  // the parameters that set them, e.g. "the window (window=N in the press's parameters)"
};

// The last `window` prompt tokens, kept (the SnapKV family's, SpecKV's, CompressKV's).
ProtectedEntries protected_window(int64_t window);

// Fails, naming the press and the fix, when a per-head budget is smaller than the
// protected entries: it could never be met (docs/budgets.md). A ratio resolves per prompt,
// so it is not refused here.
void check_budget_holds(const KvBudget& budget, const ProtectedEntries& protect, const std::string& description);

// Whether a one-shot eviction of a prompt ending at position `prompt_end` cuts anything:
// the prompt is longer than both the budget and the entries the press keeps regardless.
inline bool prompt_outgrows(int64_t prompt_end, int64_t budget, int64_t protected_entries) {
  return prompt_end > budget && prompt_end > protected_entries;
}

// How many of a head's entries (positions ascending) lie before `position`: its prompt
// entries when `position` is the prompt's end.
int64_t entries_before(const int32_t* positions, int64_t length, int64_t position);

// SnapKV's choice of one head: the `k` best of the candidates [0, C) by their scores
// (C = candidate_scores.size()), then every entry of [C, end), ascending.
std::vector<int32_t> top_k_then_range(std::span<const float> candidate_scores, int64_t k, int64_t end);

// The session's host of a press that uses a capability (`uses`: "drafts", "runs a
// lookahead", ...); fails, naming the press, when it was never attached to a session (a
// press driven by hand).
PressHost& session_host(PressHost* host, const std::string& description, std::string_view uses);

class PromptPress : public Press {
 public:
  // `protect`: the entries the budget must hold (none for a press without a budget).
  PromptPress(const PressParams& params, const KvBudget& budget, const ProtectedEntries& protect = {});

  std::string describe() const override { return description_; }
  void on_attach(const PressModelShape& shape, PressHost& host) override;
  // kPromptBegin (the prompt's end, the budget for it) and kQuestion (the prompt stays the
  // context; decode step 1 is the first token fed after the question).
  PressPoints points() const override { return {PressPoint::kPromptBegin, PressPoint::kQuestion}; }
  void act(const PressAt& at, KvCache& cache) override;

 protected:
  const std::string& description() const { return description_; }
  // Stands where a prefill of positions [0, prompt_end) has just ended, as kPromptBegin of
  // that prompt leaves it: a deferred eviction resumed on another session.
  void resume_prompt(int64_t prompt_end);
  int64_t prompt_end() const { return prompt_end_; }        // T; 0 before any prefill
  int64_t decode_origin() const { return decode_origin_; }  // the position of decode step 1's token
  int64_t budget_entries() const { return budget_entries_; }  // b for this prompt
  const KvBudget& budget() const { return budget_; }
  // A one-shot eviction at the prompt's end cuts something (prompt_outgrows with the
  // protected entries).
  bool cuts_prompt() const { return prompt_outgrows(prompt_end_, budget_entries_, protected_entries_); }
  // session_host of this press.
  PressHost& host(std::string_view uses) const { return session_host(host_, description_, uses); }

 private:
  std::string description_;
  KvBudget budget_;
  int64_t protected_entries_;
  PressHost* host_ = nullptr;
  int64_t prompt_end_ = 0;
  int64_t decode_origin_ = 0;
  int64_t budget_entries_ = 0;
};

}  // namespace deferkv
