#pragma once
// Sizing a haystack to a token budget: the largest size whose prompt fits, found by
// bisection as RULER does (a prompt's length grows with its haystack, if not always
// strictly: needles move and tokens merge at the seams, which bisection tolerates).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deferkv/eval_tasks.h"
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

// A later question over a fitted prompt's haystack: `prompt` is the same haystack with
// another question, whose context part must encode to the fitted one's context ids (an
// error otherwise: the turns would not share their context).
TaskTurn question_turn(const PromptBuilder& builder, const FittedPrompt& fitted, const SplitPrompt& prompt,
                       std::vector<std::string> references);

}  // namespace deferkv::eval
