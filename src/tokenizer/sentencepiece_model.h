#pragma once
// SentencePiece-style BPE (GGUF model "llama", or a tokenizer.json BPE model over "▁"
// text with byte fallback): spaces become U+2581, the text is cut into characters,
// the best-ranked adjacent pair of pieces is merged until none can be, and characters
// that are no piece become byte tokens <0xXX>.
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/merger.h"
#include "tokenizer/vocab.h"

namespace deferkv {

class SentencePieceModel {
 public:
  // A vocabulary with scores (GGUF) merges any two pieces whose joined text is a normal
  // piece, ranked by that piece's score, as SentencePiece and llama.cpp do. Without
  // scores (tokenizer.json) `merges` lists the merges, best first.
  SentencePieceModel(const Vocab& vocab,
                     const std::vector<std::pair<std::string, std::string>>& merges,
                     bool byte_fallback);

  // Appends the ids of `text` (valid UTF-8 holding no special tokens). `space_prefix`
  // puts one space before it.
  void encode(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;

 private:
  int32_t char_token(uint32_t packed) const;
  void emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const;
  // Merges one word (characters that may join) and appends its ids.
  void encode_word(std::string_view text, std::vector<MergeSymbol>& symbols, Merger& merger,
                   std::vector<int32_t>& out) const;

  MergeTable merges_;
  // A character's UTF-8 bytes packed into a word -> its normal token.
  std::unordered_map<uint32_t, int32_t> char_tokens_;
  // Pairs of packed characters that stand next to each other inside some normal token.
  // No merge can join two characters that are not such a pair, so the text is cut there
  // and merged word by word: the same result as merging it whole, much faster.
  std::unordered_set<uint64_t> joined_pairs_;
  std::array<int32_t, 256> byte_tokens_;  // <0xXX> ids, -1 where absent
  int32_t unk_;
  bool byte_fallback_;
};

}  // namespace deferkv
