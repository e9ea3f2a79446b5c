// The encode -> decode round trip of SentencePiece-BPE vocabularies (round_trip.h says
// what is asserted): stories260K's own 512 pieces, Llama-2's 32000 and phi-3's.
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
  for (const char* path : {"/models/stories260K.gguf", "/tests/data/vocab/ggml-vocab-llama-spm.gguf",
                           "/tests/data/vocab/ggml-vocab-phi-3.gguf"}) {
    g_tokenizers.push_back(Tokenizer::from_gguf(GgufFile(std::string(DEFERKV_SOURCE_DIR) + path)));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::check_round_trip(g_tokenizers, data, size);
  return 0;
}
