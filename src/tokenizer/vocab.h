#pragma once
// A vocabulary as the loaders read it: token spellings, types and scores, the special
// token ids and the BOS/EOS rules.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "deferkv/tokenizer.h"

namespace deferkv {

// Hash for maps keyed by std::string that can be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

struct Vocab {
  std::vector<std::string> texts;  // as the vocabulary spells them ("▁the", "Ġthe", "<0x0A>")
  std::vector<TokenKind> kinds;
  std::vector<float> scores;  // SentencePiece piece scores; empty when merges rank pieces
  // Special tokens that swallow the whitespace before (lstrip) or after (rstrip) them
  // when found in the text, as Hugging Face added tokens can. Empty: none do.
  std::vector<bool> lstrip, rstrip;
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false, add_eos = false;
  std::string chat_template;

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
  // Spelling -> id; the lowest id wins when a spelling repeats. Built by build_index().
  StringMap<int32_t> ids;
  void build_index();
  int32_t find(std::string_view text) const {
    const auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
};

}  // namespace deferkv
