#pragma once
// The type each matrix of a model file gets: one type for all, or one of the mixes
// llama.cpp's llama-quantize writes and people download (Q4_K_M, Q5_K_M, Q6_K), which
// keep some matrices at more bits than the rest. `make-model` writes them so that they
// can be measured and tested; `inspect` shows a file's mix.
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/dtype.h"

namespace deferkv {

enum class WeightMix {
  kUniform,  // every matrix of one type
  kQ4_K_M,   // Q4_K; Q6_K for the output and for half of the attn_v and ffn_down
  kQ5_K_M,   // Q5_K; the same promotions to Q6_K
  kQ6_K,     // Q6_K everywhere
};

// Which matrix of a dense transformer a tensor is, as the mixes tell them apart.
enum class MatrixRole {
  kTokenEmbd,
  kOutput,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kFfnGate,
  kFfnUp,
  kFfnDown,
};

struct MixedMatrix {
  std::string name;   // for errors
  MatrixRole role;
  int64_t cols;       // values per row (ne[0]): the block size must divide it
  int64_t layer = 0;  // the block it belongs to (per-layer roles)
  int64_t n_layer = 1;
  bool tied_output = false;  // no output.weight: token_embd is the output projection too
};

// The type `matrix` gets: `uniform` when mix is kUniform (Error naming the tensor when
// its rows are not a multiple of the type's block), else llama.cpp's choice for the mix,
// its fallbacks for rows that do not fit a 256-value block included (Error naming the
// tensor when that fallback is a type deferkv cannot compute with: Q5_0, Q5_1).
DType mixed_matrix_type(WeightMix mix, DType uniform, const MixedMatrix& matrix);

// "q4_k_m", "q5_k_m", "q6_k" (any case); nullopt for anything else.
std::optional<WeightMix> weight_mix_from_name(const std::string& name);
const char* weight_mix_name(WeightMix mix);  // "Q4_K_M"; "uniform"
std::string weight_mix_names();              // "q4_k_m, q5_k_m, q6_k"

// general.file_type (llama.cpp's llama_ftype) of a file of the mix, or of a file whose
// every matrix is `uniform`, so that other tools (llama-bench) name it correctly.
uint32_t llama_file_type(WeightMix mix, DType uniform);

// llama_ftype's name for a general.file_type value ("Q4_K_M", "Q4_K_S", "F16"), or
// nullopt for a value llama.h does not name.
std::optional<std::string> llama_file_type_name(uint32_t file_type);

}  // namespace deferkv
