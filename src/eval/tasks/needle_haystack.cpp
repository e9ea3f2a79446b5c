// Needle-in-a-Haystack on Paul Graham's essays, as the KV-compression code bases run it
// (KVCache-Factory run_needle_in_haystack.py, after gkamradt/LLMTest_NeedleInAHaystack):
// the essays in tokens, cut to a length; the needle's tokens put at depth% of them, moved
// back to just after the nearest period token before that point (depth 100: at the end);
// the ids decoded back to text inside the "story book" prompt.
#include <algorithm>
#include <cmath>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kNeedle =
    "\nThe best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.\n";
constexpr std::string_view kQuestion = "The best thing to do in San Francisco is: ";
// KVCache-Factory's prompt without its leading "<|im_start|> " (docs/evaluation.md).
constexpr std::string_view kPrompt =
    "This is a very long story book: <book> {context} </book>.\n Based on the content of the book, Question: "
    "{question}\nAnswer:";

}  // namespace

NeedleHaystack::NeedleHaystack(const GeneratorContext& ctx) : ctx_(ctx) {
  const Tokenizer& tokenizer = ctx.prompt.tokenizer();
  needle_tokens_ = tokenizer.encode(kNeedle, false, false);
  is_period_.resize(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    const std::string piece = tokenizer.token_piece(id);
    is_period_[static_cast<size_t>(id)] = piece == "." || piece == " .";
  }
}

const std::vector<int32_t>& NeedleHaystack::haystack_tokens(int64_t n) const {
  while (static_cast<int64_t>(haystack_.size()) < n) {
    // Like the reference, concatenate the essays once more and tokenize the whole text again.
    ++haystack_repeats_;
    std::string text;
    for (int64_t i = 0; i < haystack_repeats_; ++i) text.append(ctx_.data.niah_essays());
    haystack_ = ctx_.prompt.tokenizer().encode(text, false, false);
  }
  return haystack_;
}

GeneratedPrompt NeedleHaystack::generate(int64_t budget, double depth_percent) const {
  if (!(depth_percent >= 0 && depth_percent <= 100)) fail("a needle depth must be within 0-100 %, got {}", depth_percent);
  const std::vector<int32_t>& haystack = haystack_tokens(budget);
  const auto build = [&](int64_t n) {
    std::vector<int32_t> ids(haystack.begin(), haystack.begin() + n);
    if (depth_percent == 100) {
      ids.insert(ids.end(), needle_tokens_.begin(), needle_tokens_.end());
    } else {
      auto at = static_cast<int64_t>(static_cast<double>(n) * (depth_percent / 100));
      while (at > 0 && !is_period_[static_cast<size_t>(ids[static_cast<size_t>(at - 1)])]) --at;
      ids.insert(ids.begin() + at, needle_tokens_.begin(), needle_tokens_.end());
    }
    const std::string context = ctx_.prompt.tokenizer().decode(ids);
    const FilledTemplate text = fill_template_until(kPrompt, {{"context", context}, {"question", kQuestion}}, "context");
    return ctx_.prompt.wrap(text.text, text.field_end, "");
  };
  FittedPrompt fit = fit_prompt(ctx_.prompt, build, budget, 1, budget);
  return {std::move(fit.prompt), std::move(fit.tokens), {std::string(kNeedle)}, fit.context_tokens, {}};
}

std::string_view niah_needle() { return kNeedle; }

std::vector<double> niah_default_depths() {
  std::vector<double> depths;
  for (int i = 0; i < 10; ++i) depths.push_back(std::nearbyint(100.0 * i / 9));
  return depths;
}

}  // namespace deferkv::eval
