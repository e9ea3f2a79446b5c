#include "eval/tasks/sentence_split.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace deferkv::eval {
namespace {

constexpr std::array<std::string_view, 24> kAbbreviations = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "inc", "ltd",
    "co", "corp", "no", "vol", "fig", "approx", "dept", "est", "gen", "gov", "sen", "rep"};

bool is_closing(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

// Whether `word` (from its first to its last byte) ends a sentence.
bool ends_sentence(std::string_view word) {
  size_t end = word.size();
  while (end > 0 && is_closing(word[end - 1])) --end;
  if (end == 0) return false;
  const char mark = word[end - 1];
  if (mark == '?' || mark == '!') return true;
  if (mark != '.') return false;
  std::string_view stem = word.substr(0, end - 1);
  while (!stem.empty() && (stem.front() == '(' || stem.front() == '"' || stem.front() == '\'')) stem.remove_prefix(1);
  if (stem.size() == 1 && std::isalpha(static_cast<unsigned char>(stem[0]))) return false;  // an initial
  if (stem.find('.') != std::string_view::npos && stem.size() <= 5) return false;          // e.g, U.S, i.e
  std::string lower(stem);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), lower) == kAbbreviations.end();
}

}  // namespace

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> sentences;
  size_t start = 0, word_begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ' ') continue;
    if (ends_sentence(text.substr(word_begin, i - word_begin))) {
      sentences.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
    word_begin = i + 1;
  }
  if (start < text.size()) sentences.emplace_back(text.substr(start));
  return sentences;
}

}  // namespace deferkv::eval
