#include "tokenizer/byte_level_model.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/merger.h"
#include "tokenizer/word_cache.h"

namespace deferkv {

ByteLevelModel::ByteLevelModel(const Vocab& vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               const PreTokenizerConfig& pre)
    : splitter_(pre.patterns), ignore_merges_(pre.ignore_merges) {
  const auto normal = [&](std::string_view text) {
    const int32_t id = vocab.find(text);
    return id >= 0 && vocab.kinds[id] == TokenKind::kNormal ? id : -1;
  };
  for (int b = 0; b < 256; ++b) byte_tokens_[b] = normal(byte_level_chars()[b]);
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t left = normal(a), right = normal(b), result = normal(a + b);
    if (left >= 0 && right >= 0 && result >= 0) {
      merges_.add(left, right, {-static_cast<float>(rank), result});
    }
  }
  if (ignore_merges_) {
    std::string bytes;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.kinds[id] == TokenKind::kNormal && byte_level_decode(vocab.texts[id], bytes)) {
        whole_pieces_.emplace(bytes, id);
      }
    }
  }
}

void ByteLevelModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<MergeSymbol> symbols;
  Merger merger;
  WordCache cache;
  splitter_.split(text, [&](std::string_view piece) {
    if (cache.append(piece, out)) return;
    const size_t first = out.size();
    if (ignore_merges_) {
      const auto it = whole_pieces_.find(piece);
      if (it != whole_pieces_.end()) {
        out.push_back(it->second);
        cache.add(piece, out, first);
        return;
      }
    }
    symbols.clear();
    for (size_t i = 0; i < piece.size(); ++i) {
      symbols.push_back(
          {byte_tokens_[static_cast<uint8_t>(piece[i])], static_cast<uint32_t>(i), 1, 0, 0});
    }
    merger.run(merges_, symbols);
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
      // A byte the vocabulary cannot spell (Falcon and StarCoder lack a few) is dropped,
      // as Hugging Face's BPE without unk_token and llama.cpp do.
      if (symbols[i].id >= 0) out.push_back(symbols[i].id);
    }
    cache.add(piece, out, first);
  });
}

}  // namespace deferkv
