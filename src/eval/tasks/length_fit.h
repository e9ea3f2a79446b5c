#pragma once
// Sizing a haystack to a token budget: the largest size whose prompt fits, found by
// bisection as RULER does (a prompt's length grows with its haystack, if not always
// strictly: needles move and tokens merge at the seams, which bisection tolerates).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/tasks/prompt_builder.h"

namespace deferkv::eval {

struct FittedPrompt {
  int64_t size = 0;  // haystack units (lines, words, documents, tokens)
  std::string prompt;
  std::vector<int32_t> tokens;
  int64_t context_tokens = 0;  // tokens[0, context_tokens): the context part's
};

// The largest size in [min_size, max_size] whose prompt (build(size)) encodes to at most
// `budget` tokens. Error when even min_size is over the budget.
FittedPrompt fit_prompt(const PromptBuilder& builder, const std::function<SplitPrompt(int64_t)>& build,
                        int64_t budget, int64_t min_size, int64_t max_size);

}  // namespace deferkv::eval
