// RULER's eight needle-in-a-haystack tasks (scripts/data/synthetic/niah.py): needles
// "One of the special magic {values} for {key} is: {value}." hidden in a noise, essay or
// needle haystack; the question asks for the values of one or more keys.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/sentence_split.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kTemplate =
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
    "What are all the special magic {type_needle_v} for {query} mentioned in the provided text?";
constexpr std::string_view kAnswerPrefix = " The special magic {type_needle_v} for {query} mentioned in the provided text are";
constexpr std::string_view kNeedle = "One of the special magic {type_needle_v} for {key} is: {value}.";
constexpr std::string_view kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

std::string_view kind_name(NeedleKind kind) {
  switch (kind) {
    case NeedleKind::kWords: return "words";
    case NeedleKind::kNumbers: return "numbers";
    case NeedleKind::kUuids: return "uuids";
  }
  return "?";
}

// str(uuid.UUID(int=getrandbits(128), version=4)): version nibble 4, variant bits 10.
std::string random_uuid(Rng& rng) {
  uint64_t high = rng.bits(), low = rng.bits();
  high = (high & ~0xf000ULL) | 0x4000ULL;
  low = (low & ~(0xc000ULL << 48)) | (0x8000ULL << 48);
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff, high & 0xffff,
                     low >> 48, low & 0xffffffffffffULL);
}

std::string random_value(Rng& rng, NeedleKind kind, const TaskData& data) {
  switch (kind) {
    case NeedleKind::kNumbers: return std::to_string(rng.uniform(1000000, 9999999));
    // An adjective-noun pair, uniform over the pairs as random.choice over RULER's list of them.
    case NeedleKind::kWords: return rng.choice(data.adjectives()) + "-" + rng.choice(data.nouns());
    case NeedleKind::kUuids: return random_uuid(rng);
  }
  return "";
}

// np.round(np.linspace(0, 100, num=40)).astype(int): where essay needles may go.
std::vector<double> essay_depths() {
  std::vector<double> depths;
  for (int i = 0; i < 40; ++i) depths.push_back(std::nearbyint(100.0 * i / 39));
  return depths;
}

// What a sample draws before its haystack is sized: keys, values, needles, the query.
struct NeedleDraw {
  std::vector<std::string> needles;  // in insertion order
  // Per question (questions_per_context of them; one today): its keys joined, its values.
  std::vector<std::vector<std::string>> answers;
  std::vector<std::string> queries;
  std::vector<double> depths;  // essay haystack: one per needle
};

NeedleDraw draw_needles(const GeneratorContext& ctx, const NiahConfig& c, Rng& rng) {
  // Q questions over one haystack ask Q disjoint sets of num_queries keys, so the haystack
  // holds at least that many keys (Q = 1: RULER's draw, unchanged).
  const auto questions = static_cast<int>(ctx.questions_per_context);
  const int num_keys = std::max(c.num_keys, c.num_queries * questions);
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  NeedleDraw d;
  for (int k = 0; k < num_keys; ++k) {
    keys.push_back(random_value(rng, c.keys, ctx.data));
    values.emplace_back();
    for (int v = 0; v < c.num_values; ++v) {
      values.back().push_back(random_value(rng, c.values, ctx.data));
      d.needles.push_back(fill_template(
          kNeedle, {{"type_needle_v", kind_name(c.values)}, {"key", keys.back()}, {"value", values.back().back()}}));
    }
  }
  Rng(ctx.run_seed).shuffle(d.needles);
  if (c.haystack == Haystack::kEssay) {
    const std::vector<double> all = essay_depths();
    for (int64_t i : rng.sample(static_cast<int64_t>(all.size()), static_cast<int64_t>(d.needles.size()))) {
      d.depths.push_back(all[static_cast<size_t>(i)]);
    }
  }
  const std::vector<int64_t> asked = rng.sample(num_keys, static_cast<int64_t>(c.num_queries) * questions);
  for (int q = 0; q < questions; ++q) {
    std::vector<std::string> queries, answers;
    for (int j = 0; j < c.num_queries; ++j) {
      const auto i = static_cast<size_t>(asked[static_cast<size_t>(q * c.num_queries + j)]);
      queries.push_back(keys[i]);
      for (const std::string& v : values[i]) answers.push_back(v);
    }
    d.queries.push_back(queries.size() > 1
                            ? join(queries, ", ", 0, queries.size() - 1) + ", and " + queries.back()
                            : queries[0]);
    d.answers.push_back(std::move(answers));
  }
  return d;
}

// The first n essay words (the words repeated if n is larger), needles put between
// sentences at their depths.
std::string essay_context(const TaskData& data, const NeedleDraw& d, int64_t n) {
  const std::vector<std::string>& words = data.essay_words();
  std::string text;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) text += ' ';
    text += words[static_cast<size_t>(i) % words.size()];
  }
  const std::vector<std::string> sentences = split_sentences(strip(text));
  const auto count = static_cast<int64_t>(sentences.size());
  std::vector<int64_t> cuts;
  for (double depth : d.depths) cuts.push_back(static_cast<int64_t>(static_cast<double>(count) * (depth / 100)));
  std::sort(cuts.begin(), cuts.end());
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(count);
  std::vector<std::string> pieces;
  for (size_t i = 1; i < cuts.size(); ++i) {
    pieces.push_back(join(sentences, " ", static_cast<size_t>(cuts[i - 1]), static_cast<size_t>(cuts[i])));
    if (i - 1 < d.needles.size()) pieces.push_back(d.needles[i - 1]);
  }
  return join(pieces, " ");
}

// n lines of noise or of distractor needles, the needles inserted at random lines.
std::string line_context(const GeneratorContext& ctx, const NiahConfig& c, const NeedleDraw& d, int64_t n,
                         Rng& rng) {
  std::vector<std::string> lines;
  for (int64_t i = 0; i < n; ++i) {
    lines.push_back(c.haystack == Haystack::kNoise
                        ? std::string(kNoise)
                        : fill_template(kNeedle, {{"type_needle_v", kind_name(c.values)},
                                                  {"key", random_value(rng, c.keys, ctx.data)},
                                                  {"value", random_value(rng, c.values, ctx.data)}}));
  }
  std::vector<int64_t> at = rng.sample(n, static_cast<int64_t>(d.needles.size()));
  std::sort(at.rbegin(), at.rend());  // needle i goes before line at[i] (RULER inserts from the back)
  std::map<int64_t, const std::string*> before;
  for (size_t i = 0; i < at.size(); ++i) before[at[i]] = &d.needles[i];
  std::string text;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) text += '\n';
    if (const auto it = before.find(i); it != before.end()) text += *it->second + '\n';
    text += lines[static_cast<size_t>(i)];
  }
  return text;
}

}  // namespace

GeneratedPrompt generate_ruler_niah(const GeneratorContext& ctx, const NiahConfig& c, int64_t budget,
                                    uint64_t seed) {
  Rng rng(seed);
  const NeedleDraw d = draw_needles(ctx, c, rng);
  const uint64_t layout_seed = rng.bits();

  // One value asked: RULER rewrites the template in the singular.
  std::string task_template(kTemplate), prefix_template(kAnswerPrefix);
  std::string type_v(kind_name(c.values));
  if (c.num_queries * c.num_values == 1) {
    for (std::string* t : {&task_template, &prefix_template}) {
      *t = replace_all(replace_all(replace_all(replace_all(*t, "Some", "A"), "are all", "is"), "are", "is"),
                       "answers", "answer");
    }
    type_v.pop_back();
  }
  // The prompt of question q over a haystack of size n (the haystack is the same for every q).
  const auto build_for = [&](size_t q, int64_t n) {
    Rng layout(layout_seed);
    const std::string context = c.haystack == Haystack::kEssay ? essay_context(ctx.data, d, n)
                                                               : line_context(ctx, c, d, n, layout);
    const FilledTemplate text = fill_template_until(
        task_template, {{"type_needle_v", type_v}, {"context", context}, {"query", d.queries[q]}}, "context");
    return ctx.prompt.wrap(text.text, text.field_end,
                           fill_template(prefix_template, {{"type_needle_v", type_v}, {"query", d.queries[q]}}));
  };
  const int64_t min_size = c.haystack == Haystack::kEssay ? 1 : static_cast<int64_t>(d.needles.size());
  FittedPrompt fit = fit_prompt(ctx.prompt, [&](int64_t n) { return build_for(0, n); }, budget, min_size,
                                std::max(budget, min_size));
  std::vector<TaskTurn> turns;
  if (d.queries.size() > 1) {
    for (size_t q = 0; q < d.queries.size(); ++q) {
      turns.push_back(question_turn(ctx.prompt, fit, build_for(q, fit.size), d.answers[q]));
    }
  }
  return {std::move(fit.prompt), std::move(fit.tokens), d.answers[0], fit.context_tokens, std::move(turns)};
}

}  // namespace deferkv::eval
