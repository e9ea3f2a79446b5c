#pragma once
// Readers of tokenizer files; each returns what Tokenizer::Impl is built from.
#include <string>

#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace deferkv {

class GgufFile;

// GGUF metadata (tokenizer.ggml.*). Error naming the missing key or unknown model.
TokenizerSpec read_gguf_tokenizer(const GgufFile& file);

// Hugging Face files: tokenizer.json, or a folder holding tokenizer.json, vocab.json +
// merges.txt, or encoder.json + vocab.bpe; tokenizer_config.json beside them is read too.
TokenizerSpec read_hf_tokenizer(const std::string& path, const TokenizerOptions& options);

}  // namespace deferkv
