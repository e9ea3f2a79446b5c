#include "eval/tasks/length_fit.h"

#include <algorithm>

#include "deferkv/error.h"
#include "eval/tasks/prompt_builder.h"

namespace deferkv::eval {

FittedPrompt fit_prompt(const PromptBuilder& builder, const std::function<SplitPrompt(int64_t)>& build,
                        int64_t budget, int64_t min_size, int64_t max_size) {
  struct Measured {
    SplitPrompt prompt;
    std::vector<int32_t> tokens;
  };
  const auto measure = [&](int64_t size) {
    Measured m{build(size), {}};
    m.tokens = builder.encode(m.prompt.text);
    return m;
  };
  Measured best = measure(min_size);
  int64_t best_size = min_size;
  if (static_cast<int64_t>(best.tokens.size()) > budget) {
    fail("the prompt does not fit in {} tokens: even the smallest haystack gives {}", budget, best.tokens.size());
  }
  int64_t lo = min_size, hi = max_size + 1;  // lo fits; hi is over (or past the range)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    Measured m = measure(mid);
    if (static_cast<int64_t>(m.tokens.size()) <= budget) {
      lo = mid;
      best = std::move(m);
      best_size = mid;
    } else {
      hi = mid;
    }
  }
  const int64_t context_tokens = builder.context_tokens(best.prompt, best.tokens);
  return {best_size, std::move(best.prompt.text), std::move(best.tokens), context_tokens};
}

TaskTurn question_turn(const PromptBuilder& builder, const FittedPrompt& fitted, const SplitPrompt& prompt,
                       std::vector<std::string> references) {
  const std::vector<int32_t> tokens = builder.encode(prompt.text);
  const int64_t context = builder.context_tokens(prompt, tokens);
  if (context != fitted.context_tokens ||
      !std::equal(tokens.begin(), tokens.begin() + context, fitted.tokens.begin())) {
    fail("a later question changes how the context encodes ({} context tokens, not {})", context,
         fitted.context_tokens);
  }
  return {std::vector<int32_t>(tokens.begin() + context, tokens.end()), std::move(references)};
}

}  // namespace deferkv::eval
