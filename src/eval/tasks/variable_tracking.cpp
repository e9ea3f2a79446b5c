// RULER's variable tracking (scripts/data/synthetic/variable_tracking.py): a chain
// "VAR A = 12345", "VAR B = VAR A ", … hidden line by line in the noise haystack; the
// answer is every variable that holds the value. One worked example precedes the question.
#include <algorithm>
#include <set>

#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kTemplate =
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above.";
constexpr std::string_view kAnswerPrefix =
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are "
    "assigned the value {query}, they are: ";
constexpr std::string_view kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
// The example is sized to this many tokens, plain text (RULER: max_seq_length=500).
constexpr int64_t kExampleTokens = 500;

struct Chain {
  std::vector<std::string> variables;
  std::vector<std::string> lines;
};

// Variable names of `letters` upper-case letters, all different across the chains.
// `taken`: names already used by other chains of the sample (none when null).
std::vector<Chain> make_chains(Rng& rng, int num_chains, int num_hops, int letters, const std::string& value,
                               std::set<std::string>* taken = nullptr) {
  std::set<std::string> own;
  std::set<std::string>& used = taken != nullptr ? *taken : own;
  std::vector<Chain> chains(static_cast<size_t>(num_chains));
  for (Chain& chain : chains) {
    while (static_cast<int>(chain.variables.size()) < num_hops + 1) {
      std::string name;
      for (int i = 0; i < letters; ++i) name += static_cast<char>('A' + rng.uniform(0, 25));
      if (used.insert(name).second) chain.variables.push_back(name);
    }
    chain.lines.push_back("VAR " + chain.variables[0] + " = " + value);
    for (int j = 0; j < num_hops; ++j) {
      chain.lines.push_back("VAR " + chain.variables[j + 1] + " = VAR " + chain.variables[j] + " ");
    }
  }
  return chains;
}

std::string random_value(Rng& rng) { return std::to_string(rng.uniform(10000, 99998)); }  // np.random.randint(10000, 99999)

// n noise lines with each chain's lines inserted at random places, in order.
std::string noise_context(Rng& rng, int64_t n, const std::vector<Chain>& chains) {
  std::vector<std::string> lines(static_cast<size_t>(n), std::string(kNoise));
  for (const Chain& chain : chains) {
    std::vector<int64_t> at = rng.sample(static_cast<int64_t>(lines.size()), static_cast<int64_t>(chain.lines.size()));
    std::sort(at.begin(), at.end());
    for (size_t j = 0; j < at.size(); ++j) {
      lines.insert(lines.begin() + at[j] + static_cast<int64_t>(j), chain.lines[j]);
    }
  }
  return join(lines, "\n");
}

FilledTemplate question(const std::string& context, const std::string& value) {
  return fill_template_until(kTemplate, {{"context", context}, {"query", value}}, "context");
}

std::string answer_prefix(int num_hops, const std::string& value) {
  return fill_template(kAnswerPrefix, {{"num_v", std::to_string(num_hops + 1)}, {"query", value}});
}

// RULER's in-context example: made once (fixed noise length and chain places), then given
// fresh variable names and value for every sample. It is plain text ending with the answer.
std::string worked_example(const GeneratorContext& ctx, int num_chains, int num_hops, Rng& sample_rng) {
  const PromptBuilder plain(ctx.prompt.tokenizer(), PromptOptions{false, ""});
  const uint64_t layout_seed = Rng(ctx.run_seed).bits();
  const auto text = [&](int64_t n, const std::vector<Chain>& chains, const std::string& value) {
    Rng layout(layout_seed);
    const FilledTemplate q = question(noise_context(layout, n, chains), value);
    return plain.wrap(q.text, q.field_end, answer_prefix(num_hops, value));
  };
  Rng example_rng(layout_seed + 1);
  const std::vector<Chain> sizing_chains = make_chains(example_rng, num_chains, num_hops, 3, "12345");
  const int64_t n = fit_prompt(plain, [&](int64_t size) { return text(size, sizing_chains, "12345"); },
                               kExampleTokens, num_hops + 1, kExampleTokens)
                        .size;
  const std::string value = random_value(sample_rng);
  const std::vector<Chain> chains = make_chains(sample_rng, num_chains, num_hops, 3, value);
  return text(n, chains, value).text + " " + join(chains[0].variables, " ") + "\n";
}

}  // namespace

GeneratedPrompt generate_variable_tracking(const GeneratorContext& ctx, int num_chains, int num_hops,
                                           int64_t budget, uint64_t seed) {
  Rng rng(seed);
  std::set<std::string> used;
  std::vector<std::string> values = {random_value(rng)};
  std::vector<Chain> chains = make_chains(rng, num_chains, num_hops, 5, values[0], &used);
  const std::string example = worked_example(ctx, num_chains, num_hops, rng);
  const uint64_t layout_seed = rng.bits();
  // Q questions over one haystack: Q - 1 more chains, each with a value of its own (drawn
  // again while it repeats one), all hidden in the same noise; question q asks for the
  // variables of value q. Drawn after everything RULER's sample draws, so Q = 1 is unchanged.
  std::vector<size_t> asked_chain = {0};
  for (int64_t q = 1; q < ctx.questions_per_context; ++q) {
    std::string value = random_value(rng);
    while (std::find(values.begin(), values.end(), value) != values.end()) value = random_value(rng);
    values.push_back(value);
    asked_chain.push_back(chains.size());
    for (Chain& chain : make_chains(rng, num_chains, num_hops, 5, value, &used)) chains.push_back(std::move(chain));
  }
  const auto build_for = [&](size_t q, int64_t n) {
    Rng layout(layout_seed);
    const FilledTemplate text = question(noise_context(layout, n, chains), values[q]);
    return ctx.prompt.wrap(example + "\n" + text.text, example.size() + 1 + text.field_end,
                           answer_prefix(num_hops, values[q]));
  };
  // Noise lines: each chain's lines are placed among the lines already there, the earlier
  // chains' included, so the first chain's count is enough for all.
  const auto min_lines = static_cast<int64_t>(num_hops + 1);
  FittedPrompt fit = fit_prompt(ctx.prompt, [&](int64_t n) { return build_for(0, n); }, budget, min_lines,
                                std::max(budget, min_lines));
  std::vector<TaskTurn> turns;
  if (values.size() > 1) {
    for (size_t q = 0; q < values.size(); ++q) {
      turns.push_back(question_turn(ctx.prompt, fit, build_for(q, fit.size), chains[asked_chain[q]].variables));
    }
  }
  return {std::move(fit.prompt), std::move(fit.tokens), chains[0].variables, fit.context_tokens, std::move(turns)};
}

}  // namespace deferkv::eval
