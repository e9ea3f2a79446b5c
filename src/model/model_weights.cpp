#include "model/model_weights.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/setting.h"
#include "deferkv/error.h"
#include "kernels/quant.h"
#include "tensor/gguf_file.h"

namespace deferkv {
namespace {

class TensorFinder {
 public:
  explicit TensorFinder(const GgufFile& file) : file_(file) {}

  const GgufTensorInfo& require(const std::string& name) const {
    const GgufTensorInfo* info = file_.find_tensor(name);
    if (info == nullptr) fail("{}: tensor '{}' is missing", file_.path(), name);
    return *info;
  }

  DType computable_type(const GgufTensorInfo& info) const {
    auto layout = ggml_type_layout(info.ggml_type);
    if (!layout || !layout->computable) {
      fail("{}: tensor '{}' has type {}, which deferkv cannot compute with (supported: {})",
           file_.path(), info.name, ggml_type_name(info.ggml_type), dtype_names());
    }
    return static_cast<DType>(info.ggml_type);
  }

  WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows) const {
    const GgufTensorInfo& info = require(name);
    if (info.n_dims != 2 || info.ne[0] != cols || info.ne[1] != rows) {
      fail("{}: tensor '{}' has shape {}, expected [{}, {}]", file_.path(), name,
           info.shape_string(), cols, rows);
    }
    WeightMatrix m;
    m.type = computable_type(info);
    m.data = info.data;
    m.rows = rows;
    m.cols = cols;
    m.row_stride = static_cast<size_t>(dtype_row_bytes(m.type, cols));
    return m;
  }

  std::vector<float> vector(const std::string& name, int64_t n) const {
    const GgufTensorInfo& info = require(name);
    if (info.n_elements() != n || info.ne[0] != n) {
      fail("{}: tensor '{}' has shape {}, expected [{}]", file_.path(), name, info.shape_string(), n);
    }
    DType type = computable_type(info);
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(type, info.data, out.data(), n);
    return out;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

 private:
  const GgufFile& file_;
};

// A matrix for copy_matrices: its tensor's name (for the pages of the map released after
// the copy), and whether row groups may serve it (not a matrix also read a row at a time).
struct Candidate {
  WeightMatrix* matrix;
  std::string name;
  bool may_group;
};

// Copies the matrices that decode reads faster from a copy: into row groups where its
// type has them (row_groups.h), and with WeightMemory::kHugePages every other one too,
// as the file has it; all into one buffer, on huge pages when the setting says so. A
// copied matrix's pages of the map are released: the copy is what every product reads.
void copy_matrices(const std::vector<Candidate>& candidates, const GgufFile& file, ModelWeights& w) {
  const bool huge = weight_memory() == WeightMemory::kHugePages;
  struct Copy {
    const Candidate* from;
    bool group;
    size_t offset;
  };
  std::vector<Copy> copies;
  size_t total = 0;
  for (const Candidate& c : candidates) {
    const WeightMatrix& m = *c.matrix;
    const bool group = c.may_group && groups_rows(m.type, m.rows);
    if (!group && !huge) continue;
    copies.push_back({&c, group, total});
    const size_t bytes = group ? row_group_bytes(m.type, m.cols) * static_cast<size_t>(m.rows / kGroupRows)
                               : m.row_stride * static_cast<size_t>(m.rows);
    total += (bytes + 63) / 64 * 64;  // each copy starts on a cache line
  }
  if (copies.empty()) return;
  w.copies = HugePageBuffer(total, huge);
  for (const Copy& copy : copies) {
    WeightMatrix* m = copy.from->matrix;
    uint8_t* out = w.copies.data() + copy.offset;
    if (copy.group) {
      group_rows(m->type, m->data, m->row_stride, m->cols, m->rows, out);
      m->layout = WeightLayout::kRowGroups;
    } else {
      std::memcpy(out, m->data, m->row_stride * static_cast<size_t>(m->rows));
    }
    m->data = out;
    file.release_pages(*file.find_tensor(copy.from->name));
  }
}

}  // namespace

void WeightMatrix::copy_rows(int64_t first, int64_t count, uint8_t* out) const {
  if (layout == WeightLayout::kRowGroups) {
    ungroup_rows(type, data, cols, first, count, out, row_stride);
  } else {
    std::memcpy(out, row(first), static_cast<size_t>(count) * row_stride);
  }
}

namespace {

// The setting: the environment's, or kDefault (weight_memory).
enum class MemorySetting { kMap, kHugePages, kDefault };
std::atomic<MemorySetting>& memory_setting() {
  static std::atomic<MemorySetting> value{[] {
    const char* v = std::getenv(kWeightMemoryVariable);
    if (v == nullptr || *v == '\0') return MemorySetting::kDefault;
    return parse_weight_memory(v) == WeightMemory::kHugePages ? MemorySetting::kHugePages : MemorySetting::kMap;
  }()};
  return value;
}

}  // namespace

WeightMemory parse_weight_memory(const std::string& name) {
  static constexpr SettingName<WeightMemory> kNames[] = {{"map", WeightMemory::kMap},
                                                         {"huge-pages", WeightMemory::kHugePages}};
  return parse_setting<WeightMemory>(kWeightMemoryVariable, name, "a place for the weights", kNames);
}

WeightMemory weight_memory() {
  switch (memory_setting().load()) {
    case MemorySetting::kMap: return WeightMemory::kMap;
    case MemorySetting::kHugePages: return WeightMemory::kHugePages;
    case MemorySetting::kDefault: break;
  }
  static const bool enabled = transparent_huge_pages_enabled();
  return enabled ? WeightMemory::kHugePages : WeightMemory::kMap;
}

void set_weight_memory(WeightMemory memory) {
  memory_setting().store(memory == WeightMemory::kHugePages ? MemorySetting::kHugePages : MemorySetting::kMap);
}

ModelWeights ModelWeights::from_gguf(const GgufFile& file, const ModelConfig& c) {
  TensorFinder t(file);
  ModelWeights w;
  w.token_embd = t.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = t.vector("output_norm.weight", c.n_embd);
  w.output_tied = !t.has("output.weight");
  w.output = w.output_tied ? w.token_embd : t.matrix("output.weight", c.n_embd, c.n_vocab);
  if (c.has_rope_freq_factors) w.rope_freq_factors = t.vector("rope_freqs.weight", c.n_rot / 2);

  // Layers are added as their tensors are found, never sized from the metadata's count
  // alone (ModelConfig::from_gguf checked it against the tensors, this is the second line).
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto name = [i](const char* suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    LayerWeights& l = w.layers.emplace_back();
    l.attn_norm = t.vector(name("attn_norm.weight"), c.n_embd);
    l.wq = t.matrix(name("attn_q.weight"), c.n_embd, c.q_dim());
    l.wk = t.matrix(name("attn_k.weight"), c.n_embd, c.kv_dim());
    l.wv = t.matrix(name("attn_v.weight"), c.n_embd, c.kv_dim());
    l.wo = t.matrix(name("attn_output.weight"), c.q_dim(), c.n_embd);
    if (c.has_qkv_bias) {
      l.bq = t.vector(name("attn_q.bias"), c.q_dim());
      l.bk = t.vector(name("attn_k.bias"), c.kv_dim());
      l.bv = t.vector(name("attn_v.bias"), c.kv_dim());
    }
    if (c.has_qk_norm) {
      l.q_norm = t.vector(name("attn_q_norm.weight"), c.head_dim);
      l.k_norm = t.vector(name("attn_k_norm.weight"), c.head_dim);
    }
    l.ffn_norm = t.vector(name("ffn_norm.weight"), c.n_embd);
    l.w_gate = t.matrix(name("ffn_gate.weight"), c.n_embd, c.n_ff);
    l.w_up = t.matrix(name("ffn_up.weight"), c.n_embd, c.n_ff);
    l.w_down = t.matrix(name("ffn_down.weight"), c.n_ff, c.n_embd);
  }

  // The token embedding is read a row at a time and stays as the file has it, unless it
  // is also the output projection (tied), which every token reads whole.
  std::vector<Candidate> matrices;
  if (w.output_tied) {
    matrices.push_back({&w.token_embd, "token_embd.weight", false});
  } else {
    matrices.push_back({&w.output, "output.weight", true});
  }
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto name = [i](const char* suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    matrices.push_back({&l.wq, name("attn_q.weight"), true});
    matrices.push_back({&l.wk, name("attn_k.weight"), true});
    matrices.push_back({&l.wv, name("attn_v.weight"), true});
    matrices.push_back({&l.wo, name("attn_output.weight"), true});
    matrices.push_back({&l.w_gate, name("ffn_gate.weight"), true});
    matrices.push_back({&l.w_up, name("ffn_up.weight"), true});
    matrices.push_back({&l.w_down, name("ffn_down.weight"), true});
  }
  copy_matrices(matrices, file, w);
  if (w.output_tied) w.output = w.token_embd;
  return w;
}

}  // namespace deferkv
