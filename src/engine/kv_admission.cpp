#include "engine/kv_admission.h"

#include <algorithm>

namespace deferkv {

KvProjection project_kv(int64_t bytes_per_token, int64_t n_layer, int64_t prompt_tokens, int64_t max_tokens,
                        int64_t kept_per_head, bool evicts_each_layer) {
  if (kept_per_head < 0) {
    const int64_t full = (prompt_tokens + max_tokens) * bytes_per_token;
    return {full, full};
  }
  const int64_t kept = std::min(prompt_tokens, kept_per_head);
  const int64_t after = (kept + max_tokens) * bytes_per_token;
  // One layer's whole prompt (rounded up to whole bytes) beside every layer's budget.
  const int64_t prefill = evicts_each_layer ? (prompt_tokens * bytes_per_token + n_layer - 1) / n_layer +
                                                  kept * bytes_per_token
                                            : prompt_tokens * bytes_per_token;
  return {std::max(prefill, after), after};
}

}  // namespace deferkv
