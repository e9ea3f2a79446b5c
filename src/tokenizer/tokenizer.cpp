#include "deferkv/tokenizer.h"

#include <array>

#include "base/utf8.h"
#include "deferkv/error.h"
#include "tensor/gguf_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8_scan.h"

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
    case TokenKind::kUnused: return "";
    case TokenKind::kByte: return byte_token_piece(text);
    case TokenKind::kControl:
    case TokenKind::kUnknown: return text;
    case TokenKind::kNormal:
    case TokenKind::kUserDefined: break;
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
      "<|eot_id|>", "<|eom_id|>", "<|im_end|>",   "<|end|>",
      "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // DeepSeek
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

Tokenizer::Tokenizer(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::make_unique<const Impl>(read_gguf_tokenizer(file))));
}

std::unique_ptr<Tokenizer> Tokenizer::from_path(const std::string& path,
                                                const TokenizerOptions& options) {
  if (path.ends_with(".gguf")) {
    if (!options.pre.empty()) fail("{}: a GGUF names its own pre-tokenizer; drop the override", path);
    return from_gguf(GgufFile(path));
  }
  return std::unique_ptr<Tokenizer>(
      new Tokenizer(std::make_unique<const Impl>(read_hf_tokenizer(path, options))));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  std::vector<TextFragment> fragments;
  (parse_special ? m.with_control : m.user_defined).split(text, fragments);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special && m.vocab.add_bos && m.vocab.bos >= 0) ids.push_back(m.vocab.bos);
  // SentencePiece puts a space before the text and after every special token.
  bool after_special = true;
  for (const TextFragment& fragment : fragments) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
    } else if (m.sentencepiece) {
      m.sentencepiece->encode(fragment.text, m.add_space_prefix && after_special, ids);
      after_special = false;
    } else {
      m.byte_level->encode(fragment.text, ids);
    }
  }
  if (add_special && m.vocab.add_eos && m.vocab.eos >= 0) ids.push_back(m.vocab.eos);
  return ids;
}

std::string Tokenizer::token_piece(int32_t id) const {
  impl_->check(id);
  return impl_->pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) impl_->append_piece(id, at_start, out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->end_of_generation[id];
}

TokenKind Tokenizer::token_kind(int32_t id) const {
  impl_->check(id);
  return impl_->vocab.kinds[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check(id);
  return impl_->vocab.texts[id];
}

int32_t Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }
const std::string& Tokenizer::model_name() const { return impl_->model_name; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }
const std::string& Tokenizer::chat_template() const { return impl_->vocab.chat_template; }

}  // namespace deferkv
