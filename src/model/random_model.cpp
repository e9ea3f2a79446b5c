#include "model/random_model.h"

#include <cmath>
#include <functional>
#include <deque>
#include <random>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "model/gguf_model_metadata.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

constexpr double kPi = 3.14159265358979323846;

uint64_t seed_for(uint64_t seed, const std::string& name) {
  return seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(name);
}

// Llama-3.1's frequency factors (scale 8, low/high frequency factors 1 and 4, original
// context 8192), as its converter computes them.
std::vector<float> llama3_factors(int64_t n_rot, float base) {
  const double factor = 8.0, low = 1.0, high = 4.0, original_ctx = 8192.0;
  std::vector<float> factors;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / n_rot);
    const double wavelen = 2 * kPi / freq;
    if (wavelen < original_ctx / high) {
      factors.push_back(1.0f);
    } else if (wavelen > original_ctx / low) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original_ctx / wavelen - low) / (high - low);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

class ModelBuilder {
 public:
  ModelBuilder(const RandomModelSpec& spec, GgufWriter& writer) : spec_(spec), writer_(writer) {}

  // A [rows x cols] matrix of the type the spec's mix gives its role in block `layer`,
  // values ~ N(0, stddev) (stddev 0: zeros), produced row by row at write time.
  void matrix(const std::string& name, MatrixRole role, int64_t layer, int64_t cols, int64_t rows,
              double stddev) {
    const DType type = mixed_matrix_type(spec_.mix, spec_.weight_type,
                                         {name, role, cols, layer, spec_.n_layer, spec_.tied_output});
    const uint64_t seed = seed_for(spec_.seed, name);
    writer_.add_tensor(name, static_cast<uint32_t>(type), {cols, rows},
                       [=](const GgufByteSink& sink) {
                         std::mt19937_64 rng(seed);
                         std::normal_distribution<float> normal(0.0f, static_cast<float>(stddev > 0 ? stddev : 1));
                         std::vector<float> row(static_cast<size_t>(cols), 0.0f);
                         std::vector<uint8_t> packed(static_cast<size_t>(dtype_row_bytes(type, cols)));
                         for (int64_t r = 0; r < rows; ++r) {
                           if (stddev > 0) {
                             for (auto& v : row) v = normal(rng);
                           }
                           quantize_row(type, row.data(), packed.data(), cols);
                           sink(packed.data(), packed.size());
                         }
                       });
  }

  // A float32 vector: mean + N(0, stddev).
  void vector(const std::string& name, int64_t n, float mean, float stddev) {
    std::mt19937_64 rng(seed_for(spec_.seed, name));
    std::normal_distribution<float> normal(0.0f, stddev);
    std::vector<float> values(static_cast<size_t>(n));
    for (auto& v : values) v = mean + normal(rng);
    f32(name, std::move(values));
  }

  void f32(const std::string& name, std::vector<float> values) {
    owned_.push_back(std::move(values));
    const auto& v = owned_.back();
    writer_.add_tensor(name, DType::F32, {static_cast<int64_t>(v.size())}, v.data(),
                       v.size() * sizeof(float));
  }

 private:
  const RandomModelSpec& spec_;
  GgufWriter& writer_;
  std::deque<std::vector<float>> owned_;  // keeps 1-D tensors alive until write()
};

void check_spec(const RandomModelSpec& s) {
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 ||
      s.n_ctx <= 0) {
    fail("make-model: sizes must be positive");
  }
  if (s.n_head % s.n_head_kv != 0) {
    fail("make-model: n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv);
  }
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if (head_dim <= 0 || head_dim % 2 != 0) fail("make-model: head size {} must be even", head_dim);
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0) {
    fail("make-model: n_embd {} is not a multiple of n_head {}; give --head-dim", s.n_embd, s.n_head);
  }
}

}  // namespace

int64_t random_model_parameters(const RandomModelSpec& s, int64_t n_vocab) {
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q = s.n_head * head_dim, kv = s.n_head_kv * head_dim;
  const int64_t per_layer = s.n_embd * (q + 2 * kv) + q * s.n_embd + 3 * s.n_embd * s.n_ff + 2 * s.n_embd;
  return n_vocab * s.n_embd * (s.tied_output ? 1 : 2) + s.n_layer * per_layer + s.n_embd;
}

void write_random_model(const RandomModelSpec& s, const std::string& vocab_gguf,
                        const std::string& out_path) {
  check_spec(s);
  GgufFile vocab(vocab_gguf);
  const int64_t n_vocab = gguf_vocab_size(vocab);
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * head_dim, kv_dim = s.n_head_kv * head_dim;

  GgufWriter w;
  const GgufModelShape shape{s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, head_dim, s.n_ff, s.n_ctx,
                             n_vocab,  s.rope_base, 1e-6f};
  add_model_metadata(w, shape, vocab,
                     fmt::format("deferkv random {} {}M {}", architecture_name(s.arch),
                                 random_model_parameters(s, n_vocab) / 1000000,
                                 s.mix == WeightMix::kUniform ? dtype_name(s.weight_type) : weight_mix_name(s.mix)),
                     llama_file_type(s.mix, s.weight_type));

  ModelBuilder b(s, w);
  // Scales keep activations of order 1 through the layers: N(0, 1/sqrt(fan_in)).
  const double embd_std = 1.0;
  b.matrix("token_embd.weight", MatrixRole::kTokenEmbd, 0, s.n_embd, n_vocab, embd_std);
  b.vector("output_norm.weight", s.n_embd, 1.0f, 0.1f);
  if (!s.tied_output) b.matrix("output.weight", MatrixRole::kOutput, 0, s.n_embd, n_vocab, 1.0 / std::sqrt(s.n_embd));
  if (s.llama3_rope_factors) b.f32("rope_freqs.weight", llama3_factors(head_dim, s.rope_base));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    auto name = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    b.vector(name("attn_norm.weight"), s.n_embd, 1.0f, 0.1f);
    b.matrix(name("attn_q.weight"), MatrixRole::kAttnQ, l, s.n_embd, q_dim, 1.0 / std::sqrt(s.n_embd));
    b.matrix(name("attn_k.weight"), MatrixRole::kAttnK, l, s.n_embd, kv_dim, 1.0 / std::sqrt(s.n_embd));
    b.matrix(name("attn_v.weight"), MatrixRole::kAttnV, l, s.n_embd, kv_dim, 1.0 / std::sqrt(s.n_embd));
    b.matrix(name("attn_output.weight"), MatrixRole::kAttnOutput, l, q_dim, s.n_embd, 1.0 / std::sqrt(q_dim));
    if (s.arch == Architecture::kQwen2) {
      b.vector(name("attn_q.bias"), q_dim, 0.0f, 0.1f);
      b.vector(name("attn_k.bias"), kv_dim, 0.0f, 0.1f);
      b.vector(name("attn_v.bias"), kv_dim, 0.0f, 0.1f);
    }
    if (s.arch == Architecture::kQwen3) {
      b.vector(name("attn_q_norm.weight"), head_dim, 1.0f, 0.1f);
      b.vector(name("attn_k_norm.weight"), head_dim, 1.0f, 0.1f);
    }
    b.vector(name("ffn_norm.weight"), s.n_embd, 1.0f, 0.1f);
    b.matrix(name("ffn_gate.weight"), MatrixRole::kFfnGate, l, s.n_embd, s.n_ff, 1.0 / std::sqrt(s.n_embd));
    b.matrix(name("ffn_up.weight"), MatrixRole::kFfnUp, l, s.n_embd, s.n_ff, 1.0 / std::sqrt(s.n_embd));
    b.matrix(name("ffn_down.weight"), MatrixRole::kFfnDown, l, s.n_ff, s.n_embd, s.attention_only ? 0.0 : 1.0 / std::sqrt(s.n_ff));
  }
  w.write(out_path);
}

}  // namespace deferkv
