#include "eval/tasks/length_fit.h"

#include "deferkv/error.h"
#include "eval/tasks/prompt_builder.h"

namespace deferkv::eval {

FittedPrompt fit_prompt(const PromptBuilder& builder, const std::function<std::string(int64_t)>& build,
                        int64_t budget, int64_t min_size, int64_t max_size) {
  const auto measure = [&](int64_t size) {
    FittedPrompt p{size, build(size), {}};
    p.tokens = builder.encode(p.prompt);
    return p;
  };
  FittedPrompt best = measure(min_size);
  if (static_cast<int64_t>(best.tokens.size()) > budget) {
    fail("the prompt does not fit in {} tokens: even the smallest haystack gives {}", budget, best.tokens.size());
  }
  int64_t lo = min_size, hi = max_size + 1;  // lo fits; hi is over (or past the range)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    FittedPrompt p = measure(mid);
    if (static_cast<int64_t>(p.tokens.size()) <= budget) {
      lo = mid;
      best = std::move(p);
    } else {
      hi = mid;
    }
  }
  return best;
}

}  // namespace deferkv::eval
