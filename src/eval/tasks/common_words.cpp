// RULER's common words extraction (scripts/data/synthetic/common_words_extraction.py): a
// numbered list where 10 words come often and the rest rarely; the answer is the 10.
// One worked example (a shorter list with its answer) precedes the question.
#include <algorithm>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kTemplate =
    "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones "
    "that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?";
constexpr std::string_view kAnswerPrefix = " Answer: The top 10 words that appear most often in the list are:";

// wonderwords' nouns, adjectives and verbs: sorted, distinct, then shuffled with the run's seed.
std::vector<std::string> word_pool(const GeneratorContext& ctx) {
  std::vector<std::string> words = ctx.data.nouns();
  words.insert(words.end(), ctx.data.adjectives().begin(), ctx.data.adjectives().end());
  words.insert(words.end(), ctx.data.verbs().begin(), ctx.data.verbs().end());
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  Rng(ctx.run_seed).shuffle(words);
  return words;
}

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += fmt::format("{}{}. {}", i > 0 ? " " : "", i + 1, words[i]);
  return out;
}

struct WordList {
  std::string context;
  std::vector<std::string> common;
};

// n distinct words; the first `num_common` repeated `common_repeats` times, the others
// `rare_repeats` times, in an order shuffled with the run's seed.
WordList word_list(const GeneratorContext& ctx, const std::vector<std::string>& pool, const std::vector<int64_t>& picks,
                   int num_common, int common_repeats, int rare_repeats) {
  WordList out;
  std::vector<std::string> chosen;
  for (int64_t i : picks) chosen.push_back(pool[static_cast<size_t>(i)]);
  out.common.assign(chosen.begin(), chosen.begin() + num_common);
  std::vector<std::string> list;
  for (int r = 0; r < common_repeats; ++r) list.insert(list.end(), out.common.begin(), out.common.end());
  for (int r = 0; r < rare_repeats; ++r) list.insert(list.end(), chosen.begin() + num_common, chosen.end());
  Rng(ctx.run_seed).shuffle(list);
  out.context = numbered(list);
  return out;
}

}  // namespace

GeneratedPrompt generate_common_words(const GeneratorContext& ctx, const CweConfig& c, int64_t length,
                                      int64_t budget, uint64_t seed) {
  const std::vector<std::string> pool = word_pool(ctx);
  const auto pool_size = static_cast<int64_t>(pool.size());
  // Below 4096 tokens RULER uses a smaller example and fewer repeats.
  const bool short_context = length < 4096;
  const int64_t example_words = short_context ? 20 : 40;
  const int example_common = short_context ? 3 : 10, example_rare = short_context ? 1 : 3;
  const int common_repeats = short_context ? 6 : c.freq_common, rare_repeats = short_context ? 1 : c.freq_uncommon;

  Rng rng(seed);
  const WordList example =
      word_list(ctx, pool, rng.sample(pool_size, example_words), c.num_common, example_common, example_rare);
  const std::string example_text =
      ctx.prompt.wrap(fill_template(kTemplate, {{"context", example.context}}), 0, kAnswerPrefix).text + " " +
      numbered(example.common);
  const uint64_t list_seed = rng.bits();
  std::vector<std::string> answers;
  const auto build = [&](int64_t n) {
    Rng list_rng(list_seed);
    WordList list = word_list(ctx, pool, list_rng.sample(pool_size, n), c.num_common, common_repeats, rare_repeats);
    answers = std::move(list.common);
    const FilledTemplate text = fill_template_until(kTemplate, {{"context", list.context}}, "context");
    const SplitPrompt turn = ctx.prompt.wrap(text.text, text.field_end, kAnswerPrefix);
    return SplitPrompt{example_text + "\n" + turn.text, example_text.size() + 1 + turn.context_end};
  };
  FittedPrompt fit = fit_prompt(ctx.prompt, build, budget, c.num_common, std::min(budget, pool_size));
  const int64_t tokens = static_cast<int64_t>(fit.tokens.size());
  if (fit.size == pool_size && tokens < budget - budget / 100) {
    fail("{} tokens need more than the {} distinct words of the wonderwords lists (RULER then draws from "
         "english_words.json, which deferkv does not ship)", length, pool_size);
  }
  build(fit.size);  // the answers of the fitted list
  return {std::move(fit.prompt), std::move(fit.tokens), answers, fit.context_tokens, {}};
}

}  // namespace deferkv::eval
