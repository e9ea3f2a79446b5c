// The encode -> decode round trip of byte-level BPE vocabularies (round_trip.h says what
// is asserted), one per pre-tokenizer family: GPT-2, Qwen2 (vocab.json + merges.txt),
// Llama-3 (encoder.json + vocab.bpe) and DeepSeek-LLM.
#include <memory>
#include <string>
#include <vector>

#include "round_trip.h"
#include "tensor/gguf_file.h"

using namespace deferkv;

namespace {
std::vector<std::unique_ptr<Tokenizer>> g_tokenizers;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string vocab = std::string(DEFERKV_SOURCE_DIR) + "/tests/data/vocab/";
  g_tokenizers.push_back(Tokenizer::from_gguf(GgufFile(vocab + "ggml-vocab-gpt-2.gguf")));
  g_tokenizers.push_back(Tokenizer::from_path(vocab + "qwen2"));
  g_tokenizers.push_back(Tokenizer::from_path(vocab + "llama3.2-bpe", {"llama-bpe"}));
  g_tokenizers.push_back(Tokenizer::from_gguf(GgufFile(vocab + "ggml-vocab-deepseek-llm.gguf")));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::check_round_trip(g_tokenizers, data, size);
  return 0;
}
