#pragma once
// Byte-level BPE (GGUF model "gpt2"): the pre-tokenizer regexes cut the text into
// pieces, each piece's bytes start as the single-byte tokens of the GPT-2 alphabet, and
// the best-ranked merges join them.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/vocab.h"

namespace deferkv {

class ByteLevelModel {
 public:
  // Merges whose parts or result are not normal tokens are left out.
  ByteLevelModel(const Vocab& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                 const PreTokenizerConfig& pre);

  // Appends the ids of `text` (valid UTF-8 holding no special tokens).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  RegexSplitter splitter_;
  MergeTable merges_;
  std::array<int32_t, 256> byte_tokens_;  // token of each byte's character, -1 if absent
  // ignore_merges: a piece's raw bytes -> the normal token spelling them.
  StringMap<int32_t> whole_pieces_;
  bool ignore_merges_;
};

}  // namespace deferkv
