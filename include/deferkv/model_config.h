#pragma once
// Hyper-parameters of a transformer, read from GGUF metadata.
#include <cstdint>
#include <string>

namespace deferkv {

class GgufFile;

enum class Architecture { kLlama, kQwen2, kQwen3 };

// How rotary embeddings pair dimensions: kInterleaved rotates (x[2i], x[2i+1]) (ggml's
// "normal" mode, used for `llama` GGUFs whose q/k weights the converter permuted);
// kNeox rotates (x[i], x[i + n_rot/2]) (Qwen2/Qwen3).
enum class RopeStyle { kInterleaved, kNeox };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  int64_t n_rot = 0;               // rotated dimensions per head (<= head_dim)
  float rope_linear_scale = 1.0f;  // positions are multiplied by this ("linear" scaling)
  RopeStyle rope_style = RopeStyle::kInterleaved;
  bool has_qkv_bias = false;       // qwen2
  bool has_qk_norm = false;        // qwen3: RMSNorm over each q and k head
  bool has_rope_freq_factors = false;  // llama3: rope_freqs.weight divides the frequencies

  int64_t n_group() const { return n_head / n_head_kv; }  // query heads per KV head
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }

  // Reads the config of `file`; errors name the missing or inconsistent key.
  static ModelConfig from_gguf(const GgufFile& file);
};

const char* architecture_name(Architecture arch);
// The architectures deferkv runs, for error messages and --help.
const char* supported_architectures();

}  // namespace deferkv
