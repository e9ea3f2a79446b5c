#pragma once
// Reads a Hugging Face tokenizer.json holding a BPE model: either byte-level (a ByteLevel
// pre-tokenizer, e.g. Llama-3, Qwen2) or SentencePiece-style (U+2581 spaces with byte
// fallback, e.g. Llama-2, Mistral).
#include <string>

#include "deferkv/tokenizer.h"
#include "tokenizer/hf_common.h"
#include "tokenizer/tokenizer_spec.h"

namespace deferkv {

// `config` is tokenizer_config.json when there is one beside the file (else empty).
TokenizerSpec read_tokenizer_json(const std::string& path, const HfConfig& config,
                                  const TokenizerOptions& options);

}  // namespace deferkv
