#pragma once
// The model's tensors, found by name in the GGUF and checked for shape and type.
// Matrices point into the memory map (used in place); the small 1-D tensors (norms,
// biases, rope factors) are converted to float32 copies.
#include <cstdint>
#include <vector>

#include "deferkv/model_config.h"
#include "tensor/dtype.h"

namespace deferkv {

class GgufFile;

// A matrix of `rows` rows of `cols` elements (ggml: ne[0] = cols, ne[1] = rows).
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;  // bytes

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride; }
};

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 only
  std::vector<float> q_norm, k_norm;      // qwen3 only, [head_dim]
  std::vector<float> ffn_norm;
  WeightMatrix w_gate, w_up, w_down;
};

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab rows x n_embd]
  std::vector<float> output_norm;
  WeightMatrix output;      // token_embd when the output projection is tied
  bool output_tied = false;
  std::vector<float> rope_freq_factors;  // [n_rot/2], empty when absent
  std::vector<LayerWeights> layers;

  static ModelWeights from_gguf(const GgufFile& file, const ModelConfig& config);
};

}  // namespace deferkv
