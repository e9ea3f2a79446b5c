// What the commands say about a budget that makes a press pointless (docs/budgets.md).
#include <fmt/format.h>

#include "deferkv/press.h"

namespace deferkv {

std::string budget_covers_prompt_warning(const KvBudget& budget, int64_t prompt_tokens) {
  if (!budget.is_set() || budget.resolve(prompt_tokens) < prompt_tokens) return "";
  return fmt::format("the KV budget ({} entries per head) is not smaller than the prompt ({} tokens): nothing will be "
                     "evicted", budget.resolve(prompt_tokens), prompt_tokens);
}

}  // namespace deferkv
