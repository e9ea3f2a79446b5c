#include "tokenizer/sentencepiece_model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "tokenizer/utf8_scan.h"
#include "tokenizer/word_cache.h"

namespace deferkv {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁'

uint32_t pack_char(std::string_view ch) {
  uint32_t word = 0;
  std::memcpy(&word, ch.data(), ch.size());
  return word;
}

uint64_t pack_pair(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

bool is_single_char(std::string_view text) {
  return !text.empty() && utf8_length(static_cast<uint8_t>(text[0])) == text.size();
}

}  // namespace

SentencePieceModel::SentencePieceModel(
    const Vocab& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    bool byte_fallback)
    : unk_(vocab.unk), byte_fallback_(byte_fallback) {
  byte_tokens_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const int32_t id = vocab.find(fmt::format("<0x{:02X}>", b));
    if (id >= 0 && vocab.kinds[id] == TokenKind::kByte) byte_tokens_[b] = id;
  }
  const auto normal = [&](std::string_view text) {
    const int32_t id = vocab.find(text);
    return id >= 0 && vocab.kinds[id] == TokenKind::kNormal ? id : -1;
  };
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.kinds[id] != TokenKind::kNormal) continue;
    const std::string_view text = vocab.texts[id];
    if (is_single_char(text)) char_tokens_.emplace(pack_char(text), id);
    uint32_t previous = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min(utf8_length(static_cast<uint8_t>(text[pos])), text.size() - pos);
      const uint32_t current = pack_char(text.substr(pos, len));
      if (pos > 0) joined_pairs_.insert(pack_pair(previous, current));
      previous = current;
      pos += len;
    }
  }
  if (!vocab.scores.empty()) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.kinds[id] != TokenKind::kNormal) continue;
      const std::string_view text = vocab.texts[id];
      for (size_t cut = utf8_length(static_cast<uint8_t>(text[0])); cut < text.size();
           cut += utf8_length(static_cast<uint8_t>(text[cut]))) {
        const int32_t left = normal(text.substr(0, cut));
        const int32_t right = normal(text.substr(cut));
        if (left >= 0 && right >= 0) merges_.add(left, right, {vocab.scores[id], id});
      }
    }
  } else {
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [a, b] = merges[rank];
      const int32_t left = normal(a), right = normal(b), result = normal(a + b);
      if (left >= 0 && right >= 0 && result >= 0) {
        merges_.add(left, right, {-static_cast<float>(rank), result});
      }
    }
  }
}

int32_t SentencePieceModel::char_token(uint32_t packed) const {
  const auto it = char_tokens_.find(packed);
  return it == char_tokens_.end() ? -1 : it->second;
}

void SentencePieceModel::emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = true;
    for (char c : bytes) all = all && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : bytes) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  if (unk_ >= 0) out.push_back(unk_);
}

void SentencePieceModel::encode(std::string_view text, bool space_prefix,
                                std::vector<int32_t>& out) const {
  std::string normalized;
  normalized.reserve(text.size() + 3 * 8);
  if (space_prefix) normalized += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMark;
    } else {
      normalized += c;
    }
  }
  const std::string_view all(normalized);
  std::vector<MergeSymbol> symbols;
  Merger merger;
  WordCache cache;
  size_t word_start = 0;
  uint32_t previous = 0;
  for (size_t pos = 0; pos < all.size();) {
    const size_t len = utf8_length(static_cast<uint8_t>(all[pos]));
    const uint32_t current = pack_char(all.substr(pos, len));
    if (pos > 0 && !joined_pairs_.contains(pack_pair(previous, current))) {
      const std::string_view word = all.substr(word_start, pos - word_start);
      if (!cache.append(word, out)) {
        const size_t first = out.size();
        encode_word(word, symbols, merger, out);
        cache.add(word, out, first);
      }
      word_start = pos;
    }
    previous = current;
    pos += len;
  }
  if (word_start < all.size()) encode_word(all.substr(word_start), symbols, merger, out);
}

void SentencePieceModel::encode_word(std::string_view text, std::vector<MergeSymbol>& symbols,
                                     Merger& merger, std::vector<int32_t>& out) const {
  symbols.clear();
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8_length(static_cast<uint8_t>(text[pos]));
    symbols.push_back({char_token(pack_char(text.substr(pos, len))), static_cast<uint32_t>(pos),
                       static_cast<uint32_t>(len), 0, 0});
    pos += len;
  }
  merger.run(merges_, symbols);
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const MergeSymbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      emit_unknown(text.substr(s.start, s.length), out);
    }
  }
}

}  // namespace deferkv
