#include "model/reference_forward.h"

#include <cmath>

#include "deferkv/error.h"
#include "deferkv/model_config.h"
#include "kernels/quant.h"
#include "support/hadamard_matrix.h"
#include "tensor/gguf_file.h"

namespace deferkv::testing {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

// The whole tensor, dequantised, as rows of ne[0] values.
Mat load_matrix(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* t = file.find_tensor(name);
  if (t == nullptr) fail("reference: tensor {} missing", name);
  const auto type = static_cast<DType>(t->ggml_type);
  const int64_t cols = t->ne[0];
  const int64_t row_bytes = dtype_row_bytes(type, cols);
  Mat m(static_cast<size_t>(t->n_rows()), Vec(static_cast<size_t>(cols)));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < t->n_rows(); ++r) {
    dequantize_row(type, t->data + r * row_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) m[r][c] = row[c];
  }
  return m;
}

Vec load_vector(const GgufFile& file, const std::string& name) { return load_matrix(file, name)[0]; }

bool has_tensor(const GgufFile& file, const std::string& name) { return file.find_tensor(name) != nullptr; }

// y = W x, W given as rows.
Vec matmul(const Mat& w, const Vec& x) {
  Vec y(w.size(), 0.0);
  for (size_t r = 0; r < w.size(); ++r) {
    double sum = 0;
    for (size_t c = 0; c < x.size(); ++c) sum += w[r][c] * x[c];
    y[r] = sum;
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& weight, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * weight[i];
  return y;
}

// Rotates each head of x (n_heads x head_dim) for position pos.
void rope(Vec& x, int64_t n_heads, const ModelConfig& c, const Vec& freq_factors, int64_t pos) {
  const int64_t half = c.n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* head = x.data() + h * c.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = std::pow(static_cast<double>(c.rope_base), -2.0 * i / c.n_rot);
      if (!freq_factors.empty()) inv_freq /= freq_factors[i];
      const double theta = static_cast<double>(pos) * c.rope_linear_scale * inv_freq;
      const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
      double& a = interleaved ? head[2 * i] : head[i];
      double& b = interleaved ? head[2 * i + 1] : head[i + half];
      const double x0 = a, x1 = b;
      a = x0 * std::cos(theta) - x1 * std::sin(theta);
      b = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

void add_into(Vec& y, const Vec& x) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += x[i];
}

struct Layer {
  Vec attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
  Mat wq, wk, wv, wo, w_gate, w_up, w_down;
};

// The final RMSNorm and the LM head (the token embedding when tied).
struct OutputHead {
  Mat output;
  Vec norm;
  double eps;

  Vec logits(const Vec& residual) const { return matmul(output, rmsnorm(residual, norm, eps)); }
};

// `embd`: the token embedding when the caller has it loaded already (tied models reuse it).
OutputHead load_output_head(const GgufFile& file, const ModelConfig& c, const Mat* embd = nullptr) {
  Mat output = has_tensor(file, "output.weight") ? load_matrix(file, "output.weight")
               : embd != nullptr                 ? *embd
                                                 : load_matrix(file, "token_embd.weight");
  return {std::move(output), load_vector(file, "output_norm.weight"), c.rms_eps};
}

// W x, plus the delta's scale * B (A x) when it has one.
Vec project(const Mat& w, const ReferenceDelta* delta, const Vec& x) {
  Vec y = matmul(w, x);
  if (delta == nullptr || delta->a.empty()) return y;
  const Vec low = matmul(delta->b, matmul(delta->a, x));
  for (size_t i = 0; i < y.size(); ++i) y[i] += delta->scale * low[i];
  return y;
}

// The forward over the tokens then the rows: the trace of every position.
ReferenceTrace run_reference(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                             const KeyVisibility& visible, const ReferenceRows& rows, const KvStorage& store = {}) {
  GgufFile file(gguf_path);
  const ModelConfig c = ModelConfig::from_gguf(file);
  const Mat embd = load_matrix(file, "token_embd.weight");
  const OutputHead head = load_output_head(file, c, &embd);
  const Vec freq_factors = has_tensor(file, "rope_freqs.weight") ? load_vector(file, "rope_freqs.weight") : Vec{};

  std::vector<Layer> layers(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    auto name = [l](const std::string& s) { return "blk." + std::to_string(l) + "." + s; };
    Layer& L = layers[l];
    L.attn_norm = load_vector(file, name("attn_norm.weight"));
    L.ffn_norm = load_vector(file, name("ffn_norm.weight"));
    L.wq = load_matrix(file, name("attn_q.weight"));
    L.wk = load_matrix(file, name("attn_k.weight"));
    L.wv = load_matrix(file, name("attn_v.weight"));
    L.wo = load_matrix(file, name("attn_output.weight"));
    L.w_gate = load_matrix(file, name("ffn_gate.weight"));
    L.w_up = load_matrix(file, name("ffn_up.weight"));
    L.w_down = load_matrix(file, name("ffn_down.weight"));
    if (c.has_qkv_bias) {
      L.bq = load_vector(file, name("attn_q.bias"));
      L.bk = load_vector(file, name("attn_k.bias"));
      L.bv = load_vector(file, name("attn_v.bias"));
    }
    if (c.has_qk_norm) {
      L.q_norm = load_vector(file, name("attn_q_norm.weight"));
      L.k_norm = load_vector(file, name("attn_k_norm.weight"));
    }
  }

  const size_t T = tokens.size() + rows.embeddings.size();
  // keys[l][t], values[l][t]: the cache, kv_dim values per position.
  std::vector<Mat> keys(layers.size()), values(layers.size());
  ReferenceTrace trace;
  trace.queries.resize(layers.size());
  const int64_t group = c.n_head / c.n_head_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

  for (size_t t = 0; t < T; ++t) {
    const bool is_row = t >= tokens.size();
    Vec x = is_row ? rows.embeddings[t - tokens.size()] : embd[tokens[t]];
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& L = layers[l];
      // The row's delta of projection p in this layer (null for tokens).
      auto delta = [&](int p) { return is_row && l < rows.deltas.size() ? &rows.deltas[l][p] : nullptr; };
      Vec h = rmsnorm(x, L.attn_norm, c.rms_eps);
      Vec q = project(L.wq, delta(0), h), k = project(L.wk, delta(1), h), v = project(L.wv, delta(2), h);
      if (c.has_qkv_bias) {
        add_into(q, L.bq);
        add_into(k, L.bk);
        add_into(v, L.bv);
      }
      if (c.has_qk_norm) {
        for (int64_t hd = 0; hd < c.n_head; ++hd) {
          Vec head(q.begin() + hd * c.head_dim, q.begin() + (hd + 1) * c.head_dim);
          head = rmsnorm(head, L.q_norm, c.rms_eps);
          std::copy(head.begin(), head.end(), q.begin() + hd * c.head_dim);
        }
        for (int64_t hd = 0; hd < c.n_head_kv; ++hd) {
          Vec head(k.begin() + hd * c.head_dim, k.begin() + (hd + 1) * c.head_dim);
          head = rmsnorm(head, L.k_norm, c.rms_eps);
          std::copy(head.begin(), head.end(), k.begin() + hd * c.head_dim);
        }
      }
      rope(q, c.n_head, c, freq_factors, static_cast<int64_t>(t));
      rope(k, c.n_head_kv, c, freq_factors, static_cast<int64_t>(t));
      keys[l].push_back(store ? store(k, true, static_cast<int64_t>(l)) : k);
      values[l].push_back(store ? store(v, false, static_cast<int64_t>(l)) : v);
      trace.queries[l].push_back(q);

      Vec attn(static_cast<size_t>(c.q_dim()), 0.0);
      for (int64_t hd = 0; hd < c.n_head; ++hd) {
        const int64_t g = hd / group;
        Vec scores(t + 1);
        double max_score = -1e300;
        for (size_t j = 0; j <= t; ++j) {
          if (visible && !visible(static_cast<int64_t>(l), g, static_cast<int64_t>(j), static_cast<int64_t>(t))) {
            scores[j] = -INFINITY;  // masked: exp() gives exactly 0
            continue;
          }
          double s = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) s += q[hd * c.head_dim + d] * keys[l][j][g * c.head_dim + d];
          scores[j] = s * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max_score));
        for (size_t j = 0; j <= t; ++j) {
          for (int64_t d = 0; d < c.head_dim; ++d) {
            attn[hd * c.head_dim + d] += scores[j] / sum * values[l][j][g * c.head_dim + d];
          }
        }
      }
      add_into(x, project(L.wo, delta(3), attn));

      h = rmsnorm(x, L.ffn_norm, c.rms_eps);
      Vec gate = project(L.w_gate, delta(4), h), up = project(L.w_up, delta(5), h);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      add_into(x, project(L.w_down, delta(6), gate));
    }
    trace.residuals.push_back(x);
    trace.logits.push_back(head.logits(x));
  }
  trace.keys = std::move(keys);
  trace.values = std::move(values);
  return trace;
}

}  // namespace

std::vector<std::vector<double>> reference_logits(const std::string& gguf_path,
                                                  const std::vector<int32_t>& tokens) {
  return reference_logits(gguf_path, tokens, {});
}

std::vector<std::vector<double>> reference_logits(const std::string& gguf_path,
                                                  const std::vector<int32_t>& tokens,
                                                  const KeyVisibility& visible, const KvStorage& store) {
  return run_reference(gguf_path, tokens, visible, {}, store).logits;
}

ReferenceTrace reference_trace(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                               const ReferenceRows& rows) {
  return run_reference(gguf_path, tokens, {}, rows);
}

ReferenceTrace reference_trace(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                               const KeyVisibility& visible) {
  return run_reference(gguf_path, tokens, visible, {});
}

std::vector<std::vector<double>> reference_final_residuals(const std::string& gguf_path,
                                                           const std::vector<int32_t>& tokens,
                                                           const KeyVisibility& visible) {
  return run_reference(gguf_path, tokens, visible, {}).residuals;
}

std::vector<double> reference_logits_of_residual(const std::string& gguf_path, const std::vector<double>& residual) {
  GgufFile file(gguf_path);
  return load_output_head(file, ModelConfig::from_gguf(file)).logits(residual);
}

KvStorage rounded_as(DType type, int64_t head_dim, const KeyShifts& key_shifts) {
  const bool coded = type == DType::Q8_0 || type == DType::Q4_0;
  return [=](const Vec& row, bool is_key, int64_t layer) {
    Vec out(row.size());
    std::vector<float> x(static_cast<size_t>(head_dim)), y(x.size());
    std::vector<uint8_t> stored(static_cast<size_t>(dtype_row_bytes(type, head_dim)));
    for (size_t h = 0; h < row.size(); h += static_cast<size_t>(head_dim)) {
      Vec head(row.begin() + static_cast<std::ptrdiff_t>(h), row.begin() + static_cast<std::ptrdiff_t>(h) + head_dim);
      for (double& v : head) v = static_cast<float>(v);  // the engine's projections are float32
      Vec shift(head.size(), 0.0);
      const size_t g = h / static_cast<size_t>(head_dim);
      if (is_key && !key_shifts.empty() && !key_shifts[layer][g].empty()) shift = key_shifts[layer][g];
      for (size_t i = 0; i < head.size(); ++i) head[i] -= shift[i];
      if (coded) head = hadamard_by_definition(head, static_cast<size_t>(head_dim & -head_dim));
      std::copy(head.begin(), head.end(), x.begin());
      quantize_row(type, x.data(), stored.data(), head_dim);
      dequantize_row(type, stored.data(), y.data(), head_dim);
      head.assign(y.begin(), y.end());
      if (coded) head = hadamard_by_definition(head, static_cast<size_t>(head_dim & -head_dim));
      for (size_t i = 0; i < head.size(); ++i) out[h + i] = head[i] + shift[i];
    }
    return out;
  };
}

std::vector<std::vector<double>> reference_tensor(const std::string& gguf_path, const std::string& name) {
  GgufFile file(gguf_path);
  return load_matrix(file, name);
}

double relative_l2(const float* a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace deferkv::testing
