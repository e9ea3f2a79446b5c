#include "deferkv/tokenizer.h"

#include "base/utf8.h"
#include "deferkv/error.h"
#include "tensor/gguf_file.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8_scan.h"

namespace deferkv {

Tokenizer::Tokenizer(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  return std::unique_ptr<Tokenizer>(
      new Tokenizer(std::make_unique<const Impl>(read_gguf_tokenizer(file))));
}

std::unique_ptr<Tokenizer> Tokenizer::from_path(const std::string& path,
                                                const TokenizerOptions& options) {
  if (path.ends_with(".gguf")) {
    if (!options.pre.empty())
      fail("{}: a GGUF names its own pre-tokenizer; drop the override", path);
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
bool Tokenizer::adds_space_prefix() const { return impl_->add_space_prefix; }
const std::string& Tokenizer::model_name() const { return impl_->model_name; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }
const std::string& Tokenizer::chat_template() const { return impl_->vocab.chat_template; }

}  // namespace deferkv
