#include "engine/kv_admission.h"

#include <algorithm>

namespace deferkv {

KvProjection project_kv(int64_t bytes_per_token, int64_t n_layer, int64_t prompt_tokens, int64_t max_tokens,
                        int64_t kept_per_head, bool evicts_each_layer, int64_t pool_per_head) {
  if (kept_per_head < 0) {
    const int64_t full = (prompt_tokens + max_tokens) * bytes_per_token;
    return {full, full, full};
  }
  const int64_t kept = std::min(prompt_tokens, kept_per_head);
  const int64_t after = (kept + max_tokens) * bytes_per_token;
  // What each layer holds once the prompt has passed it: its pool, or its budget.
  const bool pooled = evicts_each_layer && pool_per_head >= 0;
  const int64_t held = pooled ? std::min(prompt_tokens, std::max(pool_per_head, kept)) : kept;
  const int64_t after_pool = std::max(held * bytes_per_token, after);
  // One layer's whole prompt (rounded up to whole bytes) beside every layer's budget or pool,
  // never more than the whole prompt in every layer (a budget or pool that cuts nothing).
  const int64_t whole = prompt_tokens * bytes_per_token;
  const int64_t prefill =
      evicts_each_layer ? std::min(whole, (whole + n_layer - 1) / n_layer + held * bytes_per_token) : whole;
  return {std::max(prefill, after), pooled ? after_pool : after, after};
}

}  // namespace deferkv
