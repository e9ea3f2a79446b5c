#pragma once
// The model's tensors, found by name in the GGUF and checked for shape and type.
// Where the kernel gives huge pages (WeightMemory below), every matrix a token's forward
// reads whole is copied at load onto them; otherwise matrices point into the memory map
// (used in place), except those whose decode runs faster in row groups
// (kernels/row_groups.h: Q4_0 and Q4_K on x86), which are copied into that layout at load.
// A copied matrix's pages of the map are released. The small 1-D tensors (norms, biases,
// rope factors) are converted to float32 copies.
#include <cstdint>
#include <string>
#include <vector>

#include "base/huge_page_buffer.h"
#include "deferkv/model_config.h"
#include "kernels/row_groups.h"
#include "tensor/dtype.h"

namespace deferkv {

class GgufFile;

// A matrix of `rows` rows of `cols` elements (ggml: ne[0] = cols, ne[1] = rows).
struct WeightMatrix {
  DType type = DType::F32;
  WeightLayout layout = WeightLayout::kGgufRows;
  const uint8_t* data = nullptr;  // the GGUF rows, or the row groups
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;  // bytes of a GGUF row, whichever the layout

  // GGUF rows only.
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride; }
  // Row groups only: the group that row r (a multiple of kGroupRows) starts.
  const uint8_t* group(int64_t r) const {
    return data + static_cast<size_t>(r / kGroupRows) * row_group_bytes(type, cols);
  }
  // Rows [first, first + count) as GGUF rows, row_stride bytes apart, in either layout.
  void copy_rows(int64_t first, int64_t count, uint8_t* out) const;
};

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 only
  std::vector<float> q_norm, k_norm;      // qwen3 only, [head_dim]
  std::vector<float> ffn_norm;
  WeightMatrix w_gate, w_up, w_down;
};

// Where the matrices a token's forward reads whole (all but an untied token embedding)
// live: in the file's memory map, read in place on 4 KiB pages, or copied at load into
// memory on 2 MiB pages (base/huge_page_buffer.h says why). DEFERKV_WEIGHT_MEMORY=
// map|huge-pages in the environment picks it, read on first use (docs/cli.md); the default
// is huge pages where the kernel gives them (transparent_huge_pages_enabled), else the map.
// Huge pages cost a copy at load (about a second per GB) and take the weights out of the
// page cache's sharing between processes.
enum class WeightMemory { kMap, kHugePages };
inline constexpr const char* kWeightMemoryVariable = "DEFERKV_WEIGHT_MEMORY";
// "map" or "huge-pages" (any case); an error naming the known values otherwise.
WeightMemory parse_weight_memory(const std::string& name);
// The setting, or its default.
WeightMemory weight_memory();
// Overrides the setting for the whole process (tests), before any model is loaded.
void set_weight_memory(WeightMemory memory);

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab rows x n_embd]
  std::vector<float> output_norm;
  WeightMatrix output;      // token_embd when the output projection is tied
  bool output_tied = false;
  std::vector<float> rope_freq_factors;  // [n_rot/2], empty when absent
  std::vector<LayerWeights> layers;
  // The memory of the matrices copied at load (row groups, and every matrix a token's
  // forward reads whole when WeightMemory is kHugePages); the rest point into the map.
  HugePageBuffer copies;

  static ModelWeights from_gguf(const GgufFile& file, const ModelConfig& config);
};

}  // namespace deferkv
