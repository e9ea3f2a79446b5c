#include "press/methods/lookaheadkv/lookahead_weights.h"

#include <cmath>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

constexpr const char* kArchitecture = "lookaheadkv";
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kEmbeddings = "lookahead.embeddings";
constexpr Projection kAllProjections[] = {Projection::kQ,    Projection::kK,  Projection::kV,   Projection::kO,
                                          Projection::kGate, Projection::kUp, Projection::kDown};

std::string lora_tensor(int64_t layer, Projection p, const char* part) {
  return fmt::format("blk.{}.{}.{}", layer, projection_name(p), part);
}

// Whether the projection reads the hidden state (its input is n_embd wide); the others
// (o, down) write it (their output is n_embd wide).
bool reads_hidden_state(Projection p) { return p != Projection::kO && p != Projection::kDown; }

// What load and save both require of the weights; errors name the tensor at fault.
void check_consistent(const LookaheadWeights& w, const std::string& path) {
  const LookaheadRows& rows = w.rows;
  if (w.base_n_embd <= 0 || w.base_n_layer <= 0) {
    fail("LookaheadKV weights '{}': base n_embd {} and n_layer {} must be positive", path, w.base_n_embd,
         w.base_n_layer);
  }
  if (w.lora_rank <= 0) fail("LookaheadKV weights '{}': the LoRA rank must be positive, got {}", path, w.lora_rank);
  if (!std::isfinite(w.lora_alpha)) fail("LookaheadKV weights '{}': the LoRA alpha is {}", path, w.lora_alpha);
  if (rows.n_embd != w.base_n_embd || rows.n_rows() == 0 ||
      static_cast<int64_t>(rows.embeddings.size()) != rows.n_rows() * rows.n_embd) {
    fail("LookaheadKV weights '{}': {} holds {} values, not a positive number of rows of n_embd {}", path,
         kEmbeddings, rows.embeddings.size(), w.base_n_embd);
  }
  if (static_cast<int64_t>(rows.layers.size()) != w.base_n_layer) {
    fail("LookaheadKV weights '{}': deltas for {} layers, the base model has {}", path, rows.layers.size(),
         w.base_n_layer);
  }
  std::set<Projection> targets;
  for (Projection p : w.targets) {
    if (!targets.insert(p).second) fail("LookaheadKV weights '{}': target '{}' is listed twice", path, projection_name(p));
  }
  for (int64_t l = 0; l < w.base_n_layer; ++l) {
    for (Projection p : kAllProjections) {
      const LowRankDelta& d = rows.delta(l, p);
      if (!targets.count(p)) {
        if (!d.empty()) fail("LookaheadKV weights '{}': layer {} has a delta for '{}', which is not a target", path, l, projection_name(p));
        continue;
      }
      const std::string a = lora_tensor(l, p, "lora_a"), b = lora_tensor(l, p, "lora_b");
      if (d.rank != w.lora_rank) fail("LookaheadKV weights '{}': {} has rank {}, the file's rank is {}", path, a, d.rank, w.lora_rank);
      if (static_cast<int64_t>(d.a.size()) != d.rank * d.in || static_cast<int64_t>(d.b.size()) != d.out * d.rank) {
        fail("LookaheadKV weights '{}': {} / {} hold {} / {} values, not [{} x {}] / [{} x {}]", path, a, b, d.a.size(),
             d.b.size(), d.rank, d.in, d.out, d.rank);
      }
      if (reads_hidden_state(p) ? d.in != w.base_n_embd : d.out != w.base_n_embd) {
        fail("LookaheadKV weights '{}': {} of '{}' ({} inputs, {} outputs) does not match n_embd {}", path,
             reads_hidden_state(p) ? a : b, projection_name(p), d.in, d.out, w.base_n_embd);
      }
    }
  }
}

// The tensor, which must exist, be 2-D and of a type deferkv reads.
const GgufTensorInfo& require_matrix(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* t = file.find_tensor(name);
  if (t == nullptr) fail("LookaheadKV weights '{}': tensor '{}' is missing", file.path(), name);
  if (t->n_dims != 2) fail("LookaheadKV weights '{}': tensor '{}' has shape {}, expected 2 dimensions", file.path(), name, t->shape_string());
  const auto layout = ggml_type_layout(t->ggml_type);
  if (!layout || !layout->computable) {
    fail("LookaheadKV weights '{}': tensor '{}' has type {} (supported: {})", file.path(), name,
         ggml_type_name(t->ggml_type), dtype_names());
  }
  return *t;
}

// Fails unless ne[i] == expected[i] where expected[i] >= 0 (-1: any).
void expect_shape(const GgufFile& file, const GgufTensorInfo& t, int64_t ne0, int64_t ne1, const std::string& expected) {
  if ((ne0 >= 0 && t.ne[0] != ne0) || (ne1 >= 0 && t.ne[1] != ne1)) {
    fail("LookaheadKV weights '{}': tensor '{}' has shape {}, expected {}", file.path(), t.name, t.shape_string(), expected);
  }
}

std::vector<float> to_floats(const GgufTensorInfo& t) {
  const auto type = static_cast<DType>(t.ggml_type);
  const int64_t cols = t.ne[0];
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(type, t.data + r * dtype_row_bytes(type, cols), out.data() + r * cols, cols);
  }
  return out;
}

constexpr int64_t kMaxLayers = 4096;

int64_t positive_count(const GgufFile& file, const std::string& key) {
  const uint64_t v = file.get_u64(key);
  if (v == 0 || v > (1u << 30)) fail("LookaheadKV weights '{}': {} is {}", file.path(), key, v);
  return static_cast<int64_t>(v);
}

}  // namespace

std::pair<int64_t, int64_t> projection_widths(Projection p, const PressModelShape& s) {
  const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  switch (p) {
    case Projection::kQ: return {s.n_embd, q};
    case Projection::kK:
    case Projection::kV: return {s.n_embd, kv};
    case Projection::kO: return {q, s.n_embd};
    case Projection::kGate:
    case Projection::kUp: return {s.n_embd, s.n_ff};
    case Projection::kDown: return {s.n_ff, s.n_embd};
  }
  return {0, 0};
}

const char* projection_name(Projection p) {
  static const char* const names[] = {"q", "k", "v", "o", "gate", "up", "down"};
  return names[static_cast<size_t>(p)];
}

std::optional<Projection> projection_from_name(const std::string& name) {
  for (Projection p : kAllProjections) {
    if (name == projection_name(p)) return p;
  }
  return std::nullopt;
}

LookaheadWeights load_lookahead_weights(const std::string& path) {
  std::unique_ptr<GgufFile> opened;
  try {
    opened = std::make_unique<GgufFile>(path);
  } catch (const Error& e) {
    fail("cannot read the LookaheadKV weights '{}': {}", path, e.what());
  }
  const GgufFile& file = *opened;
  const auto architecture = file.get_string_opt("general.architecture");
  if (architecture != kArchitecture) {
    fail("'{}' is not a LookaheadKV weights file (general.architecture is '{}', expected '{}')", path,
         architecture.value_or(""), kArchitecture);
  }
  const uint64_t version = file.get_u64("lookaheadkv.format_version");
  if (version != kFormatVersion) {
    fail("LookaheadKV weights '{}': format version {} (deferkv reads version {})", path, version, kFormatVersion);
  }
  LookaheadWeights w;
  w.base_architecture = file.get_string("lookaheadkv.base.architecture");
  w.base_n_embd = positive_count(file, "lookaheadkv.base.n_embd");
  w.base_n_layer = positive_count(file, "lookaheadkv.base.n_layer");
  const int64_t n_lookahead = positive_count(file, "lookaheadkv.n_lookahead");
  w.lora_rank = positive_count(file, "lookaheadkv.lora_rank");
  w.lora_alpha = static_cast<float>(file.get("lookaheadkv.lora_alpha").as_f64("lookaheadkv.lora_alpha' of '" + path));
  const std::string targets_key = "lookaheadkv.targets";
  for (const std::string& name : file.get(targets_key).as_array(targets_key).strings(targets_key)) {
    const auto p = projection_from_name(name);
    if (!p) fail("LookaheadKV weights '{}': unknown target '{}' in {} (known: q, k, v, o, gate, up, down)", path, name, targets_key);
    w.targets.push_back(*p);
  }

  std::set<std::string> expected = {kEmbeddings};
  const GgufTensorInfo& e = require_matrix(file, kEmbeddings);
  expect_shape(file, e, w.base_n_embd, n_lookahead, fmt::format("[{}, {}] (n_embd, n_lookahead)", w.base_n_embd, n_lookahead));
  w.rows.n_embd = w.base_n_embd;
  w.rows.embeddings = to_floats(e);
  // Each layer's deltas take memory before its tensors are read: a corrupt layer count
  // must not allocate for a billion layers (a missing tensor is found below).
  if (w.base_n_layer > kMaxLayers) {
    fail("LookaheadKV weights '{}': lookaheadkv.base.n_layer is {} (at most {} layers)", path, w.base_n_layer,
         kMaxLayers);
  }
  // Every layer of a file with targets holds at least one A and one B: a layer count beyond
  // half the tensors is refused before the layers are laid out (a missing tensor of a
  // plausible count is named below).
  if (!w.targets.empty() && static_cast<uint64_t>(w.base_n_layer) > file.tensors().size() / 2) {
    fail("LookaheadKV weights '{}': lookaheadkv.base.n_layer = {}, but the file holds only {} tensors", path,
         w.base_n_layer, file.tensors().size());
  }
  w.rows.layers.resize(static_cast<size_t>(w.base_n_layer));
  const float scale = w.lora_alpha / static_cast<float>(w.lora_rank);
  for (int64_t l = 0; l < w.base_n_layer; ++l) {
    for (Projection p : w.targets) {
      const std::string a_name = lora_tensor(l, p, "lora_a"), b_name = lora_tensor(l, p, "lora_b");
      expected.insert(a_name);
      expected.insert(b_name);
      const GgufTensorInfo& a = require_matrix(file, a_name);
      const GgufTensorInfo& b = require_matrix(file, b_name);
      expect_shape(file, a, -1, w.lora_rank, fmt::format("[in, {}] (in, lora_rank)", w.lora_rank));
      expect_shape(file, b, w.lora_rank, -1, fmt::format("[{}, out] (lora_rank, out)", w.lora_rank));
      LowRankDelta& d = w.rows.layers[static_cast<size_t>(l)][static_cast<size_t>(p)];
      d = {w.lora_rank, a.ne[0], b.ne[1], scale, to_floats(a), to_floats(b)};
    }
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!expected.count(t.name)) {
      fail("LookaheadKV weights '{}': tensor '{}' is not part of the format (are lookaheadkv.targets and n_layer right?)",
           path, t.name);
    }
  }
  check_consistent(w, path);
  return w;
}

void save_lookahead_weights(const std::string& path, const LookaheadWeights& w) {
  check_consistent(w, path);
  GgufWriter out;
  out.add_metadata("general.architecture", GgufValue::of_string(kArchitecture));
  out.add_metadata("lookaheadkv.format_version", GgufValue::of_u32(kFormatVersion));
  out.add_metadata("lookaheadkv.base.architecture", GgufValue::of_string(w.base_architecture));
  out.add_metadata("lookaheadkv.base.n_embd", GgufValue::of_u32(static_cast<uint32_t>(w.base_n_embd)));
  out.add_metadata("lookaheadkv.base.n_layer", GgufValue::of_u32(static_cast<uint32_t>(w.base_n_layer)));
  out.add_metadata("lookaheadkv.n_lookahead", GgufValue::of_u32(static_cast<uint32_t>(w.rows.n_rows())));
  out.add_metadata("lookaheadkv.lora_rank", GgufValue::of_u32(static_cast<uint32_t>(w.lora_rank)));
  out.add_metadata("lookaheadkv.lora_alpha", GgufValue::of_f32(w.lora_alpha));
  std::vector<GgufValue> targets;
  for (Projection p : w.targets) targets.push_back(GgufValue::of_string(projection_name(p)));
  out.add_metadata("lookaheadkv.targets", GgufValue::of_array(GgufType::STRING, std::move(targets)));

  auto add = [&](const std::string& name, const std::vector<float>& values, int64_t cols, int64_t rows) {
    out.add_tensor(name, DType::F32, {cols, rows}, values.data(), values.size() * sizeof(float));
  };
  add(kEmbeddings, w.rows.embeddings, w.rows.n_embd, w.rows.n_rows());
  for (int64_t l = 0; l < w.base_n_layer; ++l) {
    for (Projection p : w.targets) {
      const LowRankDelta& d = w.rows.delta(l, p);
      add(lora_tensor(l, p, "lora_a"), d.a, d.in, d.rank);
      add(lora_tensor(l, p, "lora_b"), d.b, d.rank, d.out);
    }
  }
  out.write(path);
}

void check_lookahead_weights_fit(const LookaheadWeights& w, const PressModelShape& shape, const std::string& path) {
  if (w.base_n_embd != shape.n_embd || w.base_n_layer != shape.n_layer) {
    fail("the LookaheadKV weights '{}' are for a {} model with n_embd {} and {} layers; this model has n_embd {} and {} "
         "layers", path, w.base_architecture, w.base_n_embd, w.base_n_layer, shape.n_embd, shape.n_layer);
  }
  for (Projection p : w.targets) {
    const auto [in, out] = projection_widths(p, shape);
    for (int64_t l = 0; l < w.base_n_layer; ++l) {
      const LowRankDelta& d = w.rows.delta(l, p);
      if (d.in != in || d.out != out) {
        fail("the LookaheadKV weights '{}': the '{}' delta of layer {} maps {} to {} values; this model's '{}' "
             "projection maps {} to {}", path, projection_name(p), l, d.in, d.out, projection_name(p), in, out);
      }
    }
  }
}

}  // namespace deferkv
