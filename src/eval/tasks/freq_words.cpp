// RULER's frequent words extraction (scripts/data/synthetic/freq_words_extraction.py): a
// text of coded words whose counts follow Zipf's law; the most frequent word is replaced
// by the noise "...", and the answer is the next three.
#include <algorithm>
#include <cmath>

#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kTemplate =
    "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
    "appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
    "What are the three most frequently appeared words in the above coded text?";
constexpr std::string_view kAnswerPrefix =
    " Answer: According to the coded text above, the three most frequently appeared words are:";
constexpr int kWordLength = 6;

// The Riemann zeta function for alpha > 1: the series' first terms plus the
// Euler-Maclaurin estimate of the rest (error far below a count's rounding).
double zeta(double alpha) {
  constexpr int kTerms = 1000;
  double sum = 0;
  for (int k = 1; k <= kTerms; ++k) sum += std::pow(k, -alpha);
  return sum + std::pow(kTerms, 1 - alpha) / (alpha - 1) - std::pow(kTerms, -alpha) / 2;
}

// `size` distinct random lower-case words, sorted, then shuffled with the run's seed; the
// first becomes the noise word.
std::vector<std::string> coded_vocabulary(Rng& rng, int64_t size, uint64_t run_seed) {
  std::vector<std::string> vocab;
  while (static_cast<int64_t>(vocab.size()) < size) {
    std::string word;
    for (int i = 0; i < kWordLength; ++i) word += static_cast<char>('a' + rng.uniform(0, 25));
    vocab.push_back(std::move(word));
    if (static_cast<int64_t>(vocab.size()) == size) {
      std::sort(vocab.begin(), vocab.end());
      vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
    }
  }
  Rng(run_seed).shuffle(vocab);
  vocab[0] = "...";
  return vocab;
}

}  // namespace

GeneratedPrompt generate_freq_words(const GeneratorContext& ctx, double alpha, int64_t budget, uint64_t seed) {
  // RULER: vocab_size = (max_seq_length - tokens_to_generate) // 50, here at least the 4 ranked words.
  const int64_t vocab_size = std::max<int64_t>(budget / 50, 4);
  Rng rng(seed);
  const std::vector<std::string> vocab = coded_vocabulary(rng, vocab_size, ctx.run_seed);
  const double z = zeta(alpha);
  const auto build = [&](int64_t n) {
    // Rank k appears int(n * k^-alpha / zeta(alpha)) times.
    std::vector<const std::string*> words;
    for (int64_t k = 1; k <= vocab_size; ++k) {
      const auto count = static_cast<int64_t>(static_cast<double>(n) * std::pow(static_cast<double>(k), -alpha) / z);
      words.insert(words.end(), static_cast<size_t>(count), &vocab[static_cast<size_t>(k - 1)]);
    }
    Rng(ctx.run_seed).shuffle(words);
    std::string context;
    for (size_t i = 0; i < words.size(); ++i) {
      if (i > 0) context += ' ';
      context += *words[i];
    }
    const FilledTemplate text = fill_template_until(kTemplate, {{"context", context}}, "context");
    return ctx.prompt.wrap(text.text, text.field_end, kAnswerPrefix);
  };
  FittedPrompt fit = fit_prompt(ctx.prompt, build, budget, 1, 2 * budget);
  return {std::move(fit.prompt), std::move(fit.tokens), {vocab[1], vocab[2], vocab[3]}, fit.context_tokens, {}};
}

}  // namespace deferkv::eval
