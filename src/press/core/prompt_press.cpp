#include "press/core/prompt_press.h"

#include <algorithm>

#include "deferkv/error.h"
#include "press/core/selection.h"

namespace deferkv {

ProtectedEntries protected_window(int64_t window) {
  return {window, "protected window entries", "the window (window=N in the press's parameters)"};
}

void check_budget_holds(const KvBudget& budget, const ProtectedEntries& protect, const std::string& description) {
  if (budget.is_ratio() || budget.resolve(0) >= protect.count) return;
  fail("the KV budget of {} entries per head is smaller than the {} {} of '{}': raise the budget to at least {}, or "
       "shrink {}",
       budget.resolve(0), protect.count, protect.what, description, protect.count, protect.shrink);
}

int64_t entries_before(const int32_t* positions, int64_t length, int64_t position) {
  return std::lower_bound(positions, positions + length, static_cast<int32_t>(position)) - positions;
}

std::vector<int32_t> top_k_then_range(std::span<const float> candidate_scores, int64_t k, int64_t end) {
  return merge_indices(top_k(candidate_scores, k), index_range(static_cast<int64_t>(candidate_scores.size()), end));
}

PressHost& session_host(PressHost* host, const std::string& description, std::string_view uses) {
  if (host == nullptr) fail("press '{}' {}: use it on a session", description, uses);
  return *host;
}

PromptPress::PromptPress(const PressParams& params, const KvBudget& budget, const ProtectedEntries& protect)
    : description_(params.describe()), budget_(budget), protected_entries_(protect.count) {
  check_budget_holds(budget, protect, description_);
}

void PromptPress::on_attach(const PressModelShape&, PressHost& host) { host_ = &host; }

void PromptPress::resume_prompt(int64_t prompt_end) {
  prompt_end_ = prompt_end;
  decode_origin_ = prompt_end_;
  budget_entries_ = budget_.resolve(prompt_end_);
}

void PromptPress::act(const PressAt& at, KvCache&) {
  if (at.point == PressPoint::kPromptBegin) {
    resume_prompt(at.first_position + at.n_tokens);
  } else if (at.point == PressPoint::kQuestion) {
    decode_origin_ = at.first_position + at.n_tokens;
  }
}

}  // namespace deferkv
