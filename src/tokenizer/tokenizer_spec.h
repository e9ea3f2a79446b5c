#pragma once
// Everything a loader (GGUF or Hugging Face files) reads; Tokenizer::Impl is built from it.
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/vocab.h"

namespace deferkv {

enum class TokenizerFamily {
  kSentencePiece,  // characters merged into pieces, ' ' written as U+2581, byte fallback
  kByteLevel,      // regex pre-tokenizer, bytes spelt in the GPT-2 alphabet, merges
};

struct TokenizerSpec {
  TokenizerFamily family = TokenizerFamily::kSentencePiece;
  std::string model_name;  // "llama" or "gpt2", as tokenizer.ggml.model names them
  Vocab vocab;
  // Merges best first, as pairs of spellings. Empty for a SentencePiece vocabulary with
  // scores: there the score of the merged piece orders the merges.
  std::vector<std::pair<std::string, std::string>> merges;
  // SentencePiece: put one space before the text and after every special token.
  bool add_space_prefix = true;
  // SentencePiece: characters that are no token become <0xXX> byte tokens (else <unk>).
  bool byte_fallback = true;
  PreTokenizerConfig pre;  // byte-level only
};

// A merge as files store it, "Ġ t" -> ("Ġ", "t"): token spellings hold no spaces, so
// the first space splits. Error naming the file and the merge's index otherwise.
std::pair<std::string, std::string> split_merge(const std::string& merge, const std::string& path,
                                                size_t index);

}  // namespace deferkv
