#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"
#include "kernels/vec.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

// Rows per work unit when a projection is split across threads.
constexpr int64_t kMatvecGrain = 16;
constexpr int64_t kMatmulGrain = 64;
// Multiply-adds below which a chunk is not worth handing to another thread: waking a
// worker costs microseconds, which tiny models' projections do not repay.
constexpr int64_t kMinChunkWork = 1 << 16;

// Grain (rows per chunk) for a projection whose rows cost `row_work` multiply-adds.
int64_t grain_for(int64_t min_grain, int64_t row_work) {
  const int64_t rows = (kMinChunkWork + row_work - 1) / row_work;
  return (std::max(min_grain, rows) + min_grain - 1) / min_grain * min_grain;
}

std::vector<const WeightMatrix*> all_matrices(const ModelWeights& w) {
  std::vector<const WeightMatrix*> out = {&w.output};
  for (const auto& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      out.push_back(m);
    }
  }
  return out;
}

// The press checked its rows against the model when attached; this guards the memory
// reads should one not fit anyway.
void check_rows_fit(const LookaheadRows& rows, int64_t first, int64_t n, const ModelConfig& c, const ModelWeights& w) {
  if (rows.n_embd != c.n_embd || static_cast<int64_t>(rows.layers.size()) != c.n_layer || first < 0 ||
      first + n > rows.n_rows()) {
    fail("internal: rows {}..{} of {} lookahead rows of width {} and {} layers for a model of width {} and {} layers",
         first, first + n, rows.n_rows(), rows.n_embd, rows.layers.size(), c.n_embd, c.n_layer);
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    // In Projection order.
    const WeightMatrix* matrices[kProjectionCount] = {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down};
    for (size_t p = 0; p < kProjectionCount; ++p) {
      const LowRankDelta& d = rows.layers[static_cast<size_t>(l)][p];
      const bool fits = d.empty() || (d.in == matrices[p]->cols && d.out == matrices[p]->rows &&
                                      static_cast<int64_t>(d.a.size()) == d.rank * d.in &&
                                      static_cast<int64_t>(d.b.size()) == d.out * d.rank);
      if (!fits) fail("internal: low-rank delta {} of layer {} does not fit its projection", p, l);
    }
  }
}

}  // namespace

ForwardPass::ForwardPass(const ModelConfig& config, const ModelWeights& weights, int64_t max_batch,
                         int64_t kv_capacity, ThreadPool& pool)
    : config_(config), weights_(weights), pool_(pool), max_batch_(max_batch) {
  const auto b = static_cast<size_t>(max_batch);
  x_.resize(b * config.n_embd);
  norm_.resize(b * config.n_embd);
  q_.resize(b * config.q_dim());
  k_.resize(b * config.kv_dim());
  v_.resize(b * config.kv_dim());
  attn_out_.resize(b * config.q_dim());
  gate_.resize(b * config.n_ff);
  up_.resize(b * config.n_ff);

  size_t packed_bytes = 0;
  size_t scratch_floats = 0;
  for (const WeightMatrix* m : all_matrices(weights)) {
    packed_bytes = std::max(packed_bytes, packed_activation_bytes(m->type, m->cols));
    scratch_floats = std::max(scratch_floats, scratch_floats_for_matmul(m->rows, m->cols));
  }
  packed_.resize(packed_bytes);
  if (max_batch > 1) {
    matmul_scratch_.resize(static_cast<size_t>(pool.size()));
    for (auto& s : matmul_scratch_) s.resize(scratch_floats);
  }
  kv_views_.resize(static_cast<size_t>(config.n_head_kv));
  rotary_ = {config.n_rot, config.rope_base, config.rope_linear_scale, weights.rope_freq_factors,
             config.rope_style == RopeStyle::kInterleaved};
  attention_scratch_.reserve(pool.size(), kv_capacity);
}

void ForwardPass::linear(const WeightMatrix& w, const float* x, int64_t n, float* y) {
  if (n == 1) {
    pack_activation(w.type, x, w.cols, packed_.data());
    pool_.parallel_for(w.rows, grain_for(kMatvecGrain, w.cols), [&](int64_t begin, int64_t end, int) {
      matvec(w.type, w.row(begin), w.row_stride, w.cols, packed_.data(), y + begin, end - begin);
    });
    return;
  }
  pool_.parallel_for(w.rows, grain_for(kMatmulGrain, w.cols * n), [&](int64_t begin, int64_t end, int thread) {
    matmul(w.type, w.row(begin), w.row_stride, w.cols, end - begin, x, w.cols, n, y + begin,
           w.rows, matmul_scratch_[static_cast<size_t>(thread)].data());
  });
}

void ForwardPass::project(const WeightMatrix& w, const LayerDeltas* deltas, Projection p, const float* x,
                          int64_t n, float* y) {
  linear(w, x, n, y);
  if (deltas != nullptr) add_low_rank_delta((*deltas)[static_cast<size_t>(p)], x, n, y, delta_scratch_);
}

void ForwardPass::add_bias(const std::vector<float>& bias, float* y, int64_t n, int64_t width) {
  if (bias.empty()) return;
  for (int64_t i = 0; i < n; ++i) add_f32(bias.data(), y + i * width, width);
}

void ForwardPass::normalize(const std::vector<float>& weight, int64_t first, int64_t n) {
  const int64_t e = config_.n_embd;
  for (int64_t i = 0; i < n; ++i) {
    rms_norm_f32(x_.data() + (first + i) * e, weight.data(), config_.rms_eps, norm_.data() + i * e, e);
  }
}

void ForwardPass::embed(const int32_t* tokens, int64_t n) {
  const WeightMatrix& e = weights_.token_embd;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= e.rows) {
      fail("token id {} is out of the vocabulary (0..{})", tokens[i], e.rows - 1);
    }
    dequantize_row(e.type, e.row(tokens[i]), x_.data() + i * config_.n_embd, config_.n_embd);
  }
}

void ForwardPass::attention_block(int64_t layer, const int32_t* positions, int64_t n, KvCache& cache,
                                  const LayerDeltas* deltas) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  normalize(w.attn_norm, 0, n);
  project(w.wq, deltas, Projection::kQ, norm_.data(), n, q_.data());
  project(w.wk, deltas, Projection::kK, norm_.data(), n, k_.data());
  project(w.wv, deltas, Projection::kV, norm_.data(), n, v_.data());
  add_bias(w.bq, q_.data(), n, c.q_dim());
  add_bias(w.bk, k_.data(), n, c.kv_dim());
  add_bias(w.bv, v_.data(), n, c.kv_dim());

  const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
  for (int64_t i = 0; i < n; ++i) {
    float* q = q_.data() + i * c.q_dim();
    float* k = k_.data() + i * c.kv_dim();
    if (c.has_qk_norm) {
      for (int64_t h = 0; h < c.n_head; ++h) {
        rms_norm_f32(q + h * c.head_dim, w.q_norm.data(), c.rms_eps, q + h * c.head_dim, c.head_dim);
      }
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        rms_norm_f32(k + h * c.head_dim, w.k_norm.data(), c.rms_eps, k + h * c.head_dim, c.head_dim);
      }
    }
    apply_rope(q, c.n_head, c.head_dim, rope_, i, interleaved);
    apply_rope(k, c.n_head_kv, c.head_dim, rope_, i, interleaved);
  }

  cache.append(layer, k_.data(), v_.data(), positions, n);
  for (int64_t g = 0; g < c.n_head_kv; ++g) {
    kv_views_[static_cast<size_t>(g)] = cache.view(layer, g);
  }
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  attention(q_.data(), n, shape, kv_views_, attn_out_.data(), attention_scratch_, pool_);
  if (tap_) tap_(AttentionEvent{layer, n, positions, q_.data(), shape, kv_views_, rotary_, pool_});

  project(w.wo, deltas, Projection::kO, attn_out_.data(), n, norm_.data());
  add_f32(norm_.data(), x_.data(), n * c.n_embd);  // residual
}

void ForwardPass::feed_forward_block(int64_t layer, int64_t n, const LayerDeltas* deltas) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  normalize(w.ffn_norm, 0, n);
  project(w.w_gate, deltas, Projection::kGate, norm_.data(), n, gate_.data());
  project(w.w_up, deltas, Projection::kUp, norm_.data(), n, up_.data());
  swiglu_f32(gate_.data(), up_.data(), n * c.n_ff);
  project(w.w_down, deltas, Projection::kDown, gate_.data(), n, norm_.data());
  add_f32(norm_.data(), x_.data(), n * c.n_embd);  // residual
}

void ForwardPass::run(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
                      bool all_logits, float* logits) {
  if (n <= 0 || n > max_batch_) fail("internal: batch of {} tokens (max {})", n, max_batch_);
  embed(tokens, n);
  run_layers(positions, n, cache, nullptr);
  finish(positions, n, all_logits, logits);
}

void ForwardPass::finish(const int32_t* positions, int64_t n, bool all_logits, float* logits) {
  if (residual_tap_) residual_tap_(ResidualEvent{n, positions, x_.data(), config_.n_embd, pool_});
  if (logits == nullptr) return;
  const int64_t first = all_logits ? 0 : n - 1;
  const int64_t rows = n - first;
  normalize(weights_.output_norm, first, rows);
  linear(weights_.output, norm_.data(), rows, logits);
}

void ForwardPass::run_prompt(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
                             bool all_logits, float* logits, const LayerDone& layer_done) {
  if (n <= 0) fail("internal: a prompt of {} tokens", n);
  const ModelConfig& c = config_;
  const int64_t e = c.n_embd;
  stream_.resize(static_cast<size_t>(n * e));
  build_rope_table(positions, n, c.n_rot, c.rope_base, c.rope_linear_scale, weights_.rope_freq_factors,
                   prompt_rope_);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    // Chunk by chunk, in order: each chunk's rows attend to the layer's entries of the
    // chunks before it, as in run().
    for (int64_t first = 0; first < n; first += max_batch_) {
      const int64_t m = std::min(max_batch_, n - first);
      float* rows = stream_.data() + first * e;
      if (layer == 0) {
        embed(tokens + first, m);
      } else {
        std::copy_n(rows, m * e, x_.data());
      }
      use_prompt_rope(first, m);
      attention_block(layer, positions + first, m, cache, nullptr);
      feed_forward_block(layer, m, nullptr);
      if (layer + 1 < c.n_layer) {
        std::copy_n(x_.data(), m * e, rows);
        continue;
      }
      const bool last_chunk = first + m == n;
      float* out = logits == nullptr ? nullptr
                   : all_logits      ? logits + first * c.n_vocab
                   : last_chunk      ? logits
                                     : nullptr;
      finish(positions + first, m, all_logits, out);
    }
    if (layer_done) layer_done(layer);
  }
}

void ForwardPass::use_prompt_rope(int64_t first, int64_t n) {
  const int64_t pairs = prompt_rope_.n_pairs;
  rope_.n_pairs = pairs;
  rope_.cos.assign(prompt_rope_.cos.begin() + first * pairs, prompt_rope_.cos.begin() + (first + n) * pairs);
  rope_.sin.assign(prompt_rope_.sin.begin() + first * pairs, prompt_rope_.sin.begin() + (first + n) * pairs);
}

void ForwardPass::run_rows(const LookaheadRows& rows, int64_t first, const int32_t* positions, int64_t n,
                           KvCache& cache) {
  if (n <= 0 || n > max_batch_) fail("internal: batch of {} rows (max {})", n, max_batch_);
  const ModelConfig& c = config_;
  check_rows_fit(rows, first, n, c, weights_);
  std::copy_n(rows.embeddings.data() + first * c.n_embd, n * c.n_embd, x_.data());
  run_layers(positions, n, cache, &rows);
}

void ForwardPass::run_layers(const int32_t* positions, int64_t n, KvCache& cache, const LookaheadRows* rows) {
  const ModelConfig& c = config_;
  build_rope_table(positions, n, c.n_rot, c.rope_base, c.rope_linear_scale,
                   weights_.rope_freq_factors, rope_);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const LayerDeltas* layer_deltas = rows != nullptr ? &rows->layers[static_cast<size_t>(layer)] : nullptr;
    attention_block(layer, positions, n, cache, layer_deltas);
    feed_forward_block(layer, n, layer_deltas);
  }
}

}  // namespace deferkv
