// RULER's QA tasks (scripts/data/synthetic/qa.py): a SQuAD or HotpotQA question with its
// gold paragraphs among distractor documents ("Document i:\n…"); SQuAD takes distractors
// from the same article first. Question i of the dataset is sample i.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/tasks/generators.h"
#include "eval/tasks/length_fit.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

constexpr std::string_view kTemplate =
    "Answer the question based on the given documents. Only give me the answer and do not output any other "
    "words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given "
    "documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}";
constexpr std::string_view kAnswerPrefix = " Answer:";

// The documents of a sample with n of them: the gold ones, then same-article ones, then
// random others; all of them, repeated, when n is not less than the dataset's count.
std::vector<int64_t> pick_documents(const QaDataset& dataset, const QaItem& item, int64_t n, Rng& rng) {
  const auto total = static_cast<int64_t>(dataset.docs.size());
  std::vector<int64_t> docs;
  if (n >= total) {
    for (int64_t i = 0; i < n; ++i) docs.push_back(i % total);
    return docs;
  }
  const auto gold = static_cast<int64_t>(item.gold_docs.size());
  const auto more = static_cast<int64_t>(item.same_article_docs.size());
  docs = item.gold_docs;
  if (n - gold > more) {
    docs.insert(docs.end(), item.same_article_docs.begin(), item.same_article_docs.end());
    std::set<int64_t> taken(docs.begin(), docs.end());
    std::vector<int64_t> others;
    for (int64_t i = 0; i < total; ++i) {
      if (!taken.contains(i)) others.push_back(i);
    }
    for (int64_t i : rng.sample(static_cast<int64_t>(others.size()), n - gold - more)) {
      docs.push_back(others[static_cast<size_t>(i)]);
    }
  } else {
    for (int64_t i : rng.sample(more, n - gold)) docs.push_back(item.same_article_docs[static_cast<size_t>(i)]);
  }
  return docs;
}

}  // namespace

GeneratedPrompt generate_qa(const GeneratorContext& ctx, const QaDataset& dataset, std::string_view task,
                            int64_t index, int64_t budget, uint64_t seed) {
  // Q questions over one haystack: sample i asks questions i*Q .. i*Q+Q-1 of the dataset,
  // over documents that hold the gold ones of all of them (Q = 1: RULER's sample i).
  const int64_t questions = ctx.questions_per_context;
  if ((index + 1) * questions > static_cast<int64_t>(dataset.items.size())) {
    fail("{} has {} questions in '{}'; sample {} asks for more", task, dataset.items.size(), dataset.path,
         questions > 1 ? fmt::format("{} (with {} questions a context)", index, questions) : std::to_string(index));
  }
  std::vector<const QaItem*> asked;
  for (int64_t q = 0; q < questions; ++q) asked.push_back(&dataset.items[static_cast<size_t>(index * questions + q)]);
  // The documents' draw as one item's: every asked question's gold documents, then their
  // articles' other paragraphs.
  QaItem item = *asked[0];
  for (size_t q = 1; q < asked.size(); ++q) {
    for (int64_t d : asked[q]->gold_docs) {
      if (std::find(item.gold_docs.begin(), item.gold_docs.end(), d) == item.gold_docs.end()) item.gold_docs.push_back(d);
    }
  }
  if (asked.size() > 1) {
    std::vector<int64_t> more;
    for (const QaItem* a : asked) {
      for (int64_t d : a->same_article_docs) {
        if (std::find(item.gold_docs.begin(), item.gold_docs.end(), d) == item.gold_docs.end() &&
            std::find(more.begin(), more.end(), d) == more.end()) {
          more.push_back(d);
        }
      }
    }
    item.same_article_docs = std::move(more);
  }
  const auto build_for = [&](size_t q, int64_t n) {
    Rng rng(seed);
    std::vector<int64_t> docs = pick_documents(dataset, item, n, rng);
    Rng(ctx.run_seed).shuffle(docs);
    std::string context;
    for (size_t i = 0; i < docs.size(); ++i) {
      context += fmt::format("{}Document {}:\n{}", i > 0 ? "\n\n" : "", i + 1, dataset.docs[static_cast<size_t>(docs[i])]);
    }
    const FilledTemplate text =
        fill_template_until(kTemplate, {{"context", context}, {"query", asked[q]->question}}, "context");
    return ctx.prompt.wrap(text.text, text.field_end, kAnswerPrefix);
  };
  const auto min_docs = static_cast<int64_t>(item.gold_docs.size());
  FittedPrompt fit = fit_prompt(ctx.prompt, [&](int64_t n) { return build_for(0, n); }, budget, min_docs,
                                std::max(budget, min_docs));
  std::vector<TaskTurn> turns;
  if (asked.size() > 1) {
    for (size_t q = 0; q < asked.size(); ++q) turns.push_back(question_turn(ctx.prompt, fit, build_for(q, fit.size), asked[q]->answers));
  }
  return {std::move(fit.prompt), std::move(fit.tokens), asked[0]->answers, fit.context_tokens, std::move(turns)};
}

}  // namespace deferkv::eval
