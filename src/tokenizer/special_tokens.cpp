#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace deferkv {
namespace {

// ASCII whitespace, as llama.cpp strips it.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab, bool with_control) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenKind kind = vocab.kinds[id];
    const bool wanted =
        kind == TokenKind::kUserDefined ||
        (with_control && (kind == TokenKind::kControl || kind == TokenKind::kUnknown));
    const std::string& text = vocab.texts[id];
    if (!wanted || text.empty()) continue;
    const bool lstrip = !vocab.lstrip.empty() && vocab.lstrip[id];
    const bool rstrip = !vocab.rstrip.empty() && vocab.rstrip[id];
    by_first_byte_[static_cast<uint8_t>(text[0])].push_back({text, id, lstrip, rstrip});
    any_ = true;
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
  }
}

void SpecialTokenMatcher::split(std::string_view text, std::vector<TextFragment>& out) const {
  out.clear();
  size_t plain_start = 0;
  size_t pos = 0;
  while (any_ && pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
    const auto match = std::find_if(candidates.begin(), candidates.end(), [&](const auto& c) {
      return text.substr(pos).starts_with(c.text);
    });
    if (match == candidates.end()) {
      ++pos;
      continue;
    }
    size_t plain_end = pos;
    while (match->lstrip && plain_end > plain_start && is_space(text[plain_end - 1])) --plain_end;
    if (plain_end > plain_start) {
      out.push_back({text.substr(plain_start, plain_end - plain_start), -1});
    }
    out.push_back({text.substr(pos, match->text.size()), match->id});
    pos += match->text.size();
    while (match->rstrip && pos < text.size() && is_space(text[pos])) ++pos;
    plain_start = pos;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
}

}  // namespace deferkv
