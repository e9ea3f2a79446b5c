#include <algorithm>
#include <cctype>
#include <limits>

#include "deferkv/error.h"
#include "tensor/gguf_file.h"
#include "tokenizer/loaders.h"

namespace deferkv {
namespace {

// A token id key: absent reads as `fallback`; a value outside the vocabulary (stories260K
// stores u32 -1 for "none") as -1.
int32_t read_token_id(const GgufFile& file, const std::string& key, int32_t n_vocab,
                      int32_t fallback) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return fallback;
  const int64_t id = value->as_i64(key);
  return id >= 0 && id < n_vocab ? static_cast<int32_t>(id) : -1;
}

TokenKind token_kind(int64_t type, const std::string& path, size_t id) {
  if (type < 1 || type > 6) {
    fail("{}: tokenizer.ggml.token_type[{}] = {} is not a known token type (1..6)", path, id, type);
  }
  return static_cast<TokenKind>(type);
}

// Phi-3's added tokens swallow the whitespace after them (rstrip in its tokenizer.json),
// except <unk>, <s> and <|endoftext|>. GGUF does not store that, so it goes by name.
void mark_phi3_rstrip(const GgufFile& file, Vocab& vocab) {
  std::string name = file.get_string_opt("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool phi3 = name.find("phi-3") != std::string::npos ||
                    name.find("phi3") != std::string::npos ||
                    file.get_string_opt("general.architecture").value_or("") == "phi3";
  if (!phi3) return;
  vocab.rstrip.assign(vocab.texts.size(), false);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenKind kind = vocab.kinds[id];
    const std::string& text = vocab.texts[id];
    const bool added = kind == TokenKind::kControl || kind == TokenKind::kUserDefined ||
                       kind == TokenKind::kUnknown;
    vocab.rstrip[id] =
        (added && text != "<unk>" && text != "<s>" && text != "<|endoftext|>") || text == "</s>";
  }
}

}  // namespace

TokenizerSpec read_gguf_tokenizer(const GgufFile& file) {
  const std::string& path = file.path();
  TokenizerSpec spec;
  spec.model_name = file.get_string("tokenizer.ggml.model");
  if (spec.model_name == "llama") {
    spec.family = TokenizerFamily::kSentencePiece;
  } else if (spec.model_name == "gpt2") {
    spec.family = TokenizerFamily::kByteLevel;
  } else {
    fail("{}: tokenizer.ggml.model '{}' is not supported (known: llama, gpt2)", path,
         spec.model_name);
  }

  Vocab& vocab = spec.vocab;
  vocab.texts = file.get("tokenizer.ggml.tokens")
                    .as_array("tokenizer.ggml.tokens")
                    .strings("tokenizer.ggml.tokens");
  const size_t n = vocab.texts.size();
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("{}: tokenizer.ggml.tokens has {} entries", path, n);
  }
  const auto n_vocab = static_cast<int32_t>(n);
  vocab.kinds.assign(n, TokenKind::kNormal);
  if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
    const auto values =
        types->as_array("tokenizer.ggml.token_type").ints("tokenizer.ggml.token_type");
    if (values.size() != n) {
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, values.size(), n);
    }
    for (size_t i = 0; i < n; ++i) vocab.kinds[i] = token_kind(values[i], path, i);
  }

  const bool sentencepiece = spec.family == TokenizerFamily::kSentencePiece;
  if (sentencepiece) {
    vocab.scores = file.get("tokenizer.ggml.scores")
                       .as_array("tokenizer.ggml.scores")
                       .floats("tokenizer.ggml.scores");
    if (vocab.scores.size() != n) {
      fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", path, vocab.scores.size(), n);
    }
    spec.add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  } else {
    const auto merges = file.get("tokenizer.ggml.merges")
                            .as_array("tokenizer.ggml.merges")
                            .strings("tokenizer.ggml.merges");
    spec.merges.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      spec.merges.push_back(split_merge(merges[rank], path, rank));
    }
    spec.pre = pre_tokenizer_config(file.get_string_opt("tokenizer.ggml.pre").value_or("default"));
  }

  // SentencePiece vocabularies without these keys use Llama's ids (as llama.cpp does).
  vocab.bos = read_token_id(file, "tokenizer.ggml.bos_token_id", n_vocab, sentencepiece ? 1 : -1);
  vocab.eos = read_token_id(file, "tokenizer.ggml.eos_token_id", n_vocab, sentencepiece ? 2 : -1);
  vocab.unk =
      read_token_id(file, "tokenizer.ggml.unknown_token_id", n_vocab, sentencepiece ? 0 : -1);
  vocab.eot = read_token_id(file, "tokenizer.ggml.eot_token_id", n_vocab, -1);
  vocab.eom = read_token_id(file, "tokenizer.ggml.eom_token_id", n_vocab, -1);
  vocab.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token",
                                   sentencepiece || spec.pre.add_bos_by_default);
  vocab.add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", false);
  vocab.chat_template = file.get_string_opt("tokenizer.chat_template").value_or("");
  mark_phi3_rstrip(file, vocab);
  return spec;
}

}  // namespace deferkv
