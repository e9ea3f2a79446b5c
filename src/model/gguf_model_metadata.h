#pragma once
// The metadata of a model GGUF written by deferkv itself (random benchmark models,
// imported trained weights): general.*, the architecture's hyperparameters, and the
// tokenizer.* entries copied from another GGUF, so every writer names things alike.
#include <cstdint>
#include <string>

#include "deferkv/model_config.h"
#include "tensor/dtype.h"

namespace deferkv {

class GgufFile;
class GgufWriter;

struct GgufModelShape {
  Architecture arch = Architecture::kLlama;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_ctx = 0;
  int64_t n_vocab = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
};

// The number of entries in `vocab`'s tokenizer.ggml.tokens (Error when it has none).
int64_t gguf_vocab_size(const GgufFile& vocab);

// Adds general.architecture/name/file_type/alignment, the hyperparameters and every
// tokenizer.* entry of `vocab`. `file_type` is general.file_type, llama.cpp's name for the
// types of the model's matrices (llama_file_type in model/weight_mix.h).
void add_model_metadata(GgufWriter& writer, const GgufModelShape& shape, const GgufFile& vocab,
                        const std::string& name, uint32_t file_type);

}  // namespace deferkv
