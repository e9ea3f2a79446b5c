#include "eval/metrics/rouge_l.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "eval/metrics/python_text.h"
#include "eval/metrics/zh_words.h"

namespace deferkv::eval {
namespace {

using Words = std::vector<std::string>;

// The package reads its LCS back with a recursive function, one Python frame per step;
// a path longer than the interpreter's recursion limit raises RecursionError, which
// LongBench's bare `except` turns into a score of 0. Measured with CPython 3.11 and the
// call depth of LongBench/eval.py (module → scorer → rouge_score → get_scores → …):
// 990 frames of `_recon` pass, 991 fail.
constexpr size_t kMaxBacktrackFrames = 990;

// Sentences: split on every '.', drop empty pieces, collapse whitespace inside each (a
// piece of only whitespace stays, as an empty sentence).
std::vector<std::string> sentences(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view piece : split_on(text, '.')) {
    if (!piece.empty()) out.push_back(collapse_whitespace(piece));
  }
  return out;
}

// Words of a sentence: split on single spaces, so "" gives one empty word.
Words words_of(std::string_view sentence) {
  Words words;
  for (std::string_view w : split_on(sentence, ' ')) words.emplace_back(w);
  return words;
}

// The tokens of the LCS of x (reference) and y (prediction) as the package's back-track
// finds them (equal tokens: take and go diagonally; else up if table[i-1][j] >
// table[i][j-1], otherwise left), or nothing when that back-track would overflow.
std::optional<Words> backtracked_lcs(const Words& x, const Words& y) {
  const size_t n = x.size(), m = y.size();
  // Every step lowers i or j, so at least min(n, m) steps come before the edge.
  if (std::min(n, m) + 1 > kMaxBacktrackFrames) return std::nullopt;
  std::vector<uint32_t> table((n + 1) * (m + 1), 0);
  const auto at = [&](size_t i, size_t j) -> uint32_t& { return table[i * (m + 1) + j]; };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      at(i, j) = x[i - 1] == y[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
    }
  }
  Words lcs;
  size_t i = n, j = m, frames = 1;
  while (i > 0 && j > 0) {
    if (++frames > kMaxBacktrackFrames) return std::nullopt;
    if (x[i - 1] == y[j - 1]) {
      lcs.push_back(x[i - 1]);
      --i;
      --j;
    } else if (at(i - 1, j) > at(i, j - 1)) {
      --i;
    } else {
      --j;
    }
  }
  return lcs;
}

size_t distinct_words(const std::vector<std::string>& sentence_list) {
  std::unordered_set<std::string> seen;
  for (const std::string& sentence : sentence_list) {
    for (std::string& word : words_of(sentence)) seen.insert(std::move(word));
  }
  return seen.size();
}

}  // namespace

double rouge_l(std::string_view prediction, std::string_view reference) {
  const std::vector<std::string> hyp = sentences(prediction);
  const std::vector<std::string> ref = sentences(reference);
  // The package raises ValueError on an empty side.
  if (hyp.empty() || ref.empty()) return 0.0;
  const size_t m = distinct_words(ref);
  const size_t n = distinct_words(hyp);

  std::vector<Words> hyp_words;
  for (const std::string& s : hyp) hyp_words.push_back(words_of(s));
  // exclusive=True: the LCS union is a set of token strings.
  std::unordered_set<std::string> lcs_union;
  for (const std::string& ref_sentence : ref) {
    const Words ref_words = words_of(ref_sentence);
    for (const Words& h : hyp_words) {
      const std::optional<Words> lcs = backtracked_lcs(ref_words, h);
      if (!lcs) return 0.0;
      lcs_union.insert(lcs->begin(), lcs->end());
    }
  }
  const auto llcs = static_cast<double>(lcs_union.size());
  const double r_lcs = llcs / static_cast<double>(m);
  const double p_lcs = llcs / static_cast<double>(n);
  return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
}

double rouge_l_zh(std::string_view prediction, std::string_view reference) {
  const auto joined = [](std::string_view text) {
    std::string out;
    for (const std::string& word : zh_words(text)) {
      if (!out.empty()) out += ' ';
      out += word;
    }
    return out;
  };
  return rouge_l(joined(prediction), joined(reference));
}

}  // namespace deferkv::eval
