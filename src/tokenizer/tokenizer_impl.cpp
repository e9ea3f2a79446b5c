#include "tokenizer/tokenizer_impl.h"

#include <array>
#include <cstdio>

#include "deferkv/error.h"
#include "tokenizer/byte_level.h"

namespace deferkv {
namespace {

Vocab indexed(Vocab vocab) {
  vocab.build_index();
  return vocab;
}

// "<0x0A>" -> the byte 0x0A.
std::string byte_token_piece(const std::string& text) {
  unsigned value = 0;
  if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X>", &value) == 1) {
    return std::string(1, static_cast<char>(value));
  }
  return text;
}

std::string replace_space_marks(const std::string& text) {
  static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (std::string_view(text).substr(pos, 3) == kSpaceMark) {
      out += ' ';
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

std::string piece_of(TokenizerFamily family, TokenKind kind, const std::string& text) {
  switch (kind) {
    case TokenKind::kUnused:
      return "";
    case TokenKind::kByte:
      return byte_token_piece(text);
    case TokenKind::kControl:
    case TokenKind::kUnknown:
      return text;
    case TokenKind::kNormal:
    case TokenKind::kUserDefined:
      break;
  }
  if (family == TokenizerFamily::kSentencePiece) return replace_space_marks(text);
  // Byte-level: added (user-defined) tokens are stored as plain text, not in the
  // byte alphabet.
  std::string bytes;
  if (kind == TokenKind::kNormal && byte_level_decode(text, bytes)) return bytes;
  return text;
}

// Turn-ending tokens that vocabularies do not always list as eos/eot.
bool ends_turn(const std::string& text) {
  static const std::array<std::string_view, 9> kTexts = {
      "<|eot_id|>",
      "<|eom_id|>",
      "<|im_end|>",
      "<|end|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "<|end_of_text|>",
      "<EOT>",
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // DeepSeek
  for (std::string_view t : kTexts) {
    if (text == t) return true;
  }
  return false;
}

}  // namespace

Tokenizer::Impl::Impl(TokenizerSpec spec)
    : family(spec.family),
      model_name(std::move(spec.model_name)),
      pre_name(spec.pre.name),
      add_space_prefix(spec.family == TokenizerFamily::kSentencePiece && spec.add_space_prefix),
      vocab(indexed(std::move(spec.vocab))),
      with_control(vocab, true),
      user_defined(vocab, false) {
  if (family == TokenizerFamily::kSentencePiece) {
    sentencepiece = std::make_unique<SentencePieceModel>(vocab, spec.merges, spec.byte_fallback);
  } else {
    byte_level = std::make_unique<ByteLevelModel>(vocab, spec.merges, spec.pre);
  }
  pieces.reserve(vocab.texts.size());
  end_of_generation.assign(vocab.texts.size(), false);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenKind kind = vocab.kinds[id];
    pieces.push_back(piece_of(family, kind, vocab.texts[id]));
    const bool special = kind == TokenKind::kControl || kind == TokenKind::kUserDefined;
    end_of_generation[id] = (special && ends_turn(vocab.texts[id])) || id == vocab.eos ||
                            id == vocab.eot || id == vocab.eom;
  }
}

void Tokenizer::Impl::check(int32_t id) const {
  if (id < 0 || id >= vocab.size()) {
    fail("token id {} is outside the vocabulary (0..{})", id, vocab.size() - 1);
  }
}

void Tokenizer::Impl::append_piece(int32_t id, bool& at_start, std::string& out) const {
  check(id);
  std::string_view piece = pieces[id];
  if (at_start && vocab.kinds[id] != TokenKind::kControl) {
    if (add_space_prefix && piece.starts_with(' ')) piece.remove_prefix(1);
    at_start = false;
  }
  out += piece;
}

}  // namespace deferkv
