#include "eval/metrics/rouge_1.h"

#include <algorithm>
#include <map>

#include "eval/metrics/porter_stemmer.h"
#include "eval/metrics/python_text.h"

namespace deferkv::eval {
namespace {

bool is_token_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::map<std::string, size_t> counts_of(const std::vector<std::string>& tokens) {
  std::map<std::string, size_t> counts;
  for (const std::string& t : tokens) ++counts[t];
  return counts;
}

}  // namespace

std::vector<std::string> rouge_score_tokens(std::string_view text) {
  // After lower-casing, only ASCII letters and digits survive; a non-ASCII character
  // (including any byte of a multi-byte one) separates tokens.
  const std::string lowered = python_lower(text);
  std::vector<std::string> tokens;
  std::string current;
  const auto finish = [&] {
    if (current.empty()) return;
    tokens.push_back(current.size() > 3 ? porter_stem(current) : current);
    current.clear();
  };
  for (char c : lowered) {
    if (is_token_char(c)) {
      current += c;
    } else {
      finish();
    }
  }
  finish();
  return tokens;
}

double rouge_1(std::string_view prediction, std::string_view reference) {
  const auto target = counts_of(rouge_score_tokens(reference));
  const auto predicted = counts_of(rouge_score_tokens(prediction));
  size_t overlap = 0, target_total = 0, predicted_total = 0;
  for (const auto& [token, n] : target) {
    target_total += n;
    if (auto it = predicted.find(token); it != predicted.end()) overlap += std::min(n, it->second);
  }
  for (const auto& [token, n] : predicted) predicted_total += n;
  const double precision = static_cast<double>(overlap) / static_cast<double>(std::max<size_t>(predicted_total, 1));
  const double recall = static_cast<double>(overlap) / static_cast<double>(std::max<size_t>(target_total, 1));
  if (precision + recall > 0) return 2 * precision * recall / (precision + recall);
  return 0.0;
}

}  // namespace deferkv::eval
