#pragma once
// Writes a GGUF model of a chosen architecture, size and weight type with random
// weights and a real vocabulary copied from another GGUF. Used by tests (engine vs
// reference forward) and benchmarks (models of ~100M/500M parameters).
#include <cstdint>
#include <string>

#include "deferkv/model_config.h"
#include "model/weight_mix.h"
#include "tensor/dtype.h"

namespace deferkv {

struct RandomModelSpec {
  Architecture arch = Architecture::kLlama;
  int64_t n_embd = 256;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 0;  // 0: n_embd / n_head
  int64_t n_ff = 512;
  int64_t n_ctx = 4096;
  float rope_base = 10000.0f;
  DType weight_type = DType::F32;  // every matrix (embeddings and output included) ...
  WeightMix mix = WeightMix::kUniform;  // ... unless a llama.cpp mix, which then decides alone
  bool tied_output = false;        // omit output.weight
  bool llama3_rope_factors = false;  // write a rope_freqs.weight like Llama-3.1's
  bool attention_only = false;     // ffn_down = 0: the feed-forward blocks add nothing
  uint64_t seed = 1;
};

// Writes the model to `out_path`; the tokenizer.* metadata (and so the vocabulary size)
// comes from `vocab_gguf`. Errors name the bad parameter.
void write_random_model(const RandomModelSpec& spec, const std::string& vocab_gguf,
                        const std::string& out_path);

// Parameter count of the model the spec describes with a vocabulary of n_vocab.
int64_t random_model_parameters(const RandomModelSpec& spec, int64_t n_vocab);

}  // namespace deferkv
