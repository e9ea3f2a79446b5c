#include "deferkv/model_config.h"

#include <cstdint>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "tensor/gguf_file.h"

namespace deferkv {
namespace {

Architecture parse_architecture(const GgufFile& file, const std::string& name) {
  if (name == "llama") return Architecture::kLlama;
  if (name == "qwen2") return Architecture::kQwen2;
  if (name == "qwen3") return Architecture::kQwen3;
  fail("{}: unknown architecture '{}' (deferkv runs: {})", file.path(), name,
       supported_architectures());
}

// Counts and sizes read from metadata are at most 2^31 - 1 (llama.cpp keeps them in 32-bit
// ints too), so that products of two of them (q_dim = heads x head size) cannot overflow.
int64_t positive(const GgufFile& file, const std::string& key, uint64_t value) {
  if (value == 0 || value > static_cast<uint64_t>(INT32_MAX)) {
    fail("{}: metadata '{}' = {} is out of range (1 to {})", file.path(), key, value, INT32_MAX);
  }
  return static_cast<int64_t>(value);
}

// The tensors every layer has, whatever the architecture: attn_norm, attn_q/k/v/output,
// ffn_norm, ffn_gate/up/down.
constexpr uint64_t kTensorsPerLayer = 9;

// The layer count is checked against the tensors the file holds before anything is built
// per layer: a count of 8 million in a file of 20 tensors would otherwise allocate gigabytes
// for layers whose first tensor is then found missing.
void check_layers_exist(const GgufFile& file, const std::string& key, int64_t n_layer) {
  const uint64_t n_tensors = file.tensors().size();
  if (static_cast<uint64_t>(n_layer) > n_tensors / kTensorsPerLayer) {
    fail("{}: metadata '{}' = {} layers, but the file holds {} tensors ({} a layer at least): "
         "the file is corrupt or its metadata wrong",
         file.path(), key, n_layer, n_tensors, kTensorsPerLayer);
  }
  const std::string last = fmt::format("blk.{}.attn_norm.weight", n_layer - 1);
  if (file.find_tensor(last) == nullptr) {
    fail("{}: metadata '{}' = {} layers, but tensor '{}' of the last layer is missing", file.path(),
         key, n_layer, last);
  }
}

}  // namespace

const char* architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama: return "llama";
    case Architecture::kQwen2: return "qwen2";
    case Architecture::kQwen3: return "qwen3";
  }
  return "?";
}

const char* supported_architectures() { return "llama (Llama-2/3.x, Mistral), qwen2, qwen3"; }

ModelConfig ModelConfig::from_gguf(const GgufFile& file) {
  ModelConfig c;
  c.arch_name = file.get_string("general.architecture");
  c.arch = parse_architecture(file, c.arch_name);
  const std::string p = c.arch_name + ".";
  auto required = [&](const std::string& key) { return positive(file, p + key, file.get_u64(p + key)); };

  if (const GgufValue* kv_heads = file.find(p + "attention.head_count_kv");
      kv_heads && kv_heads->type == GgufType::ARRAY) {
    fail("{}: per-layer head counts ('{}attention.head_count_kv' is an array) are not supported",
         file.path(), p);
  }
  c.n_embd = required("embedding_length");
  c.n_layer = required("block_count");
  c.n_ff = required("feed_forward_length");
  c.n_head = required("attention.head_count");
  c.n_head_kv = positive(file, p + "attention.head_count_kv",
                         file.get_u64_or(p + "attention.head_count_kv", c.n_head));
  c.n_ctx_train = positive(file, p + "context_length", file.get_u64_or(p + "context_length", 2048));
  if (c.n_head % c.n_head_kv != 0) {
    fail("{}: head_count {} is not a multiple of head_count_kv {}", file.path(), c.n_head,
         c.n_head_kv);
  }
  c.head_dim = positive(file, p + "attention.key_length",
                        file.get_u64_or(p + "attention.key_length", c.n_embd / c.n_head));
  const uint64_t value_dim = file.get_u64_or(p + "attention.value_length", c.head_dim);
  if (static_cast<int64_t>(value_dim) != c.head_dim) {
    fail("{}: key_length {} differs from value_length {}; not supported", file.path(), c.head_dim,
         value_dim);
  }
  c.rms_eps = static_cast<float>(file.get_f64_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = static_cast<float>(file.get_f64_or(p + "rope.freq_base", 10000.0));
  c.n_rot = positive(file, p + "rope.dimension_count",
                     file.get_u64_or(p + "rope.dimension_count", c.head_dim));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    fail("{}: rope.dimension_count {} must be even and at most the head size {}", file.path(),
         c.n_rot, c.head_dim);
  }
  if (auto scaling = file.get_string_opt(p + "rope.scaling.type")) {
    if (*scaling == "linear") {
      const double factor = file.get_f64_or(p + "rope.scaling.factor", 1.0);
      if (!(factor > 0)) fail("{}: rope.scaling.factor {} must be positive", file.path(), factor);
      c.rope_linear_scale = static_cast<float>(1.0 / factor);
    } else if (*scaling != "none") {
      fail("{}: rope scaling '{}' is not supported (supported: none, linear, llama3 "
           "frequency factors)", file.path(), *scaling);
    }
  }
  c.rope_style = c.arch == Architecture::kLlama ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  c.has_qkv_bias = c.arch == Architecture::kQwen2;
  c.has_qk_norm = c.arch == Architecture::kQwen3;
  c.has_rope_freq_factors = file.find_tensor("rope_freqs.weight") != nullptr;

  if (const auto* embd = file.find_tensor("token_embd.weight")) {
    c.n_vocab = embd->ne[1];
  } else {
    fail("{}: tensor 'token_embd.weight' is missing", file.path());
  }
  check_layers_exist(file, p + "block_count", c.n_layer);
  return c;
}

}  // namespace deferkv
