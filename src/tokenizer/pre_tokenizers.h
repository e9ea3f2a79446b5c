#pragma once
// How byte-level BPE vocabularies split text before merging, by the names GGUF's
// `tokenizer.ggml.pre` gives them. The patterns are the models' own, as their Hugging Face
// tokenizer.json files state them (Split / ByteLevel / Digits pre-tokenizers).
#include <string>
#include <vector>

namespace deferkv {

struct PreTokenizerConfig {
  std::string name;
  // Applied in turn, each to every piece the previous one left (PCRE2 syntax).
  std::vector<std::string> patterns;
  // A piece that is itself a vocabulary token is taken whole, unmerged (HF BPE
  // `ignore_merges`, set by Llama-3's tokenizer).
  bool ignore_merges = false;
  // Whether BOS is added when the vocabulary does not say (`add_bos_token` absent).
  bool add_bos_by_default = false;
};

// Error listing the known names when `name` is unknown.
PreTokenizerConfig pre_tokenizer_config(const std::string& name);
std::vector<std::string> known_pre_tokenizers();

}  // namespace deferkv
