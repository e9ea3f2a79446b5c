#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/gemm.h"
#include "kernels/gemm_int16.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"
#include "kernels/vec.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

// Rows per work unit when a projection is split across threads.
constexpr int64_t kMatvecGrain = 16;
constexpr int64_t kMatmulGrain = 64;
// Bytes of GGUF rows a prefill product takes at a time from row groups (with_gguf_rows):
// within L2 beside the product's own tiles.
constexpr size_t kGgufRowsScratchBytes = 256 << 10;

// Rows with_gguf_rows copies back at a time: whole groups, at least one.
int64_t gguf_rows_at_once(const WeightMatrix& w) {
  const auto rows = static_cast<int64_t>(kGgufRowsScratchBytes / w.row_stride) / kGroupRows * kGroupRows;
  return std::max(rows, kGroupRows);
}

// Grain (rows per chunk) for a projection whose rows cost `row_work` multiply-adds.
int64_t grain_for(int64_t min_grain, int64_t row_work) {
  const int64_t rows = (ThreadPool::kMinWorkPerChunk + row_work - 1) / row_work;
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
  size_t gguf_rows_bytes = 0;
  for (const WeightMatrix* m : all_matrices(weights)) {
    packed_bytes = std::max(packed_bytes, packed_activation_bytes(m->type, m->cols));
    if (m->layout == WeightLayout::kRowGroups) {
      packed_bytes = std::max(packed_bytes, row_groups_activation_bytes(m->type, m->cols));
      gguf_rows_bytes = std::max(gguf_rows_bytes, static_cast<size_t>(gguf_rows_at_once(*m)) * m->row_stride);
    }
    scratch_floats = std::max(scratch_floats, scratch_floats_for_matmul(m->rows, m->cols));
    scratch_floats = std::max(scratch_floats, (gemm_int16_scratch_bytes(m->type, m->cols) + 3) / sizeof(float));
  }
  packed_.resize(packed_bytes);
  if (max_batch > 1) {
    matmul_scratch_.resize(static_cast<size_t>(pool.size()));
    for (auto& s : matmul_scratch_) s.resize(scratch_floats);
    gguf_rows_scratch_.resize(static_cast<size_t>(pool.size()));
    for (auto& s : gguf_rows_scratch_) s.resize(gguf_rows_bytes);
  }
  kv_views_.resize(static_cast<size_t>(config.n_head_kv));
  rotary_ = {config.n_rot, config.rope_base, config.rope_linear_scale, weights.rope_freq_factors,
             config.rope_style == RopeStyle::kInterleaved};
  attention_scratch_.reserve(pool.size(), kv_capacity);
}

void ForwardPass::linear(const WeightMatrix& w, const float* x, int64_t n, float* y, Input input) {
  if (n == 1 || rows_by_matvec_) {
    linear_by_matvec(w, x, n, y);
    return;
  }
  if (gemm_int16_serves(w.type, w.cols, n)) {
    linear_by_int16_gemm(w, x, n, y, input);
    return;
  }
  const float* tokens = matmul_by_gemm(w.type, n) ? gemm_tokens(x, n, w.cols, input) : nullptr;
  pool_.parallel_for(w.rows, grain_for(kMatmulGrain, w.cols * n), [&](int64_t begin, int64_t end, int thread) {
    with_gguf_rows(w, begin, end, thread, [&](const uint8_t* rows, int64_t first, int64_t count) {
      matmul(w.type, rows, w.row_stride, w.cols, count, x, w.cols, tokens, n, y + first, w.rows,
             matmul_scratch_[static_cast<size_t>(thread)].data());
    });
  });
}

template <class Pack>
void ForwardPass::pack_tokens(const PackedTokens& tokens, Input input, size_t bytes, int64_t panel_tokens,
                              const Pack& pack) {
  if (input == Input::kSameAsLast && tokens == packed_tokens_) return;
  if (packed_.size() < bytes) packed_.resize(bytes);
  pool_.parallel_for((tokens.n + panel_tokens - 1) / panel_tokens, 1,
                     [&](int64_t begin, int64_t end, int) { pack(begin, end - begin, packed_.data()); });
  packed_tokens_ = tokens;
}

const float* ForwardPass::gemm_tokens(const float* x, int64_t n, int64_t cols, Input input) {
  pack_tokens({x, n, cols, 0}, input, gemm_packed_tokens_floats(n, cols) * sizeof(float), gemm_panel_tokens(),
              [&](int64_t first, int64_t panels, uint8_t* out) {
                gemm_pack_tokens(x, cols, cols, n, first, panels, reinterpret_cast<float*>(out));
              });
  return reinterpret_cast<const float*>(packed_.data());
}

template <class Product>
void ForwardPass::with_gguf_rows(const WeightMatrix& w, int64_t begin, int64_t end, int thread,
                                 const Product& product) {
  if (w.layout == WeightLayout::kGgufRows) {
    product(w.row(begin), begin, end - begin);
    return;
  }
  uint8_t* rows = gguf_rows_scratch_[static_cast<size_t>(thread)].data();
  const int64_t at_once = gguf_rows_at_once(w);
  for (int64_t first = begin; first < end; first += at_once) {
    const int64_t count = std::min(at_once, end - first);
    w.copy_rows(first, count, rows);
    product(rows, first, count);
  }
}

void ForwardPass::linear_by_matvec(const WeightMatrix& w, const float* x, int64_t n, float* y) {
  const bool groups = w.layout == WeightLayout::kRowGroups;
  const size_t stride =
      groups ? row_groups_activation_stride(w.type, w.cols) : packed_activation_stride(w.type, w.cols);
  if (packed_.size() < stride * static_cast<size_t>(n)) packed_.resize(stride * static_cast<size_t>(n));
  packed_tokens_ = {};
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* packed = packed_.data() + i * stride;
    if (groups) {
      pack_row_groups_activation(w.type, x + i * w.cols, w.cols, packed);
    } else {
      pack_activation(w.type, x + i * w.cols, w.cols, packed);
    }
  }
  // Chunks start at multiples of the grain (16 rows and up), so at whole row groups.
  static_assert(kMatvecGrain % kGroupRows == 0);
  pool_.parallel_for(w.rows, grain_for(kMatvecGrain, w.cols * n), [&](int64_t begin, int64_t end, int) {
    // Each weight block is read from memory once and decoded once per group of rows
    // (matvec_rows), every row's result bit for bit its single-token matvec's.
    if (groups) {
      matvec_row_groups(w.type, w.group(begin), w.cols, packed_.data(), stride, n, y + begin, w.rows, end - begin);
    } else {
      matvec_rows(w.type, w.row(begin), w.row_stride, w.cols, packed_.data(), stride, n, y + begin, w.rows,
                  end - begin);
    }
  });
}

void ForwardPass::linear_by_int16_gemm(const WeightMatrix& w, const float* x, int64_t n, float* y, Input input) {
  pack_tokens({x, n, w.cols, dtype_block_elems(w.type)}, input, gemm_int16_tokens_bytes(w.type, w.cols, n),
              gemm_int16_panel_tokens(), [&](int64_t first, int64_t panels, uint8_t* out) {
                gemm_int16_pack_tokens(w.type, x, w.cols, w.cols, n, first, panels, out);
              });
  pool_.parallel_for(w.rows, grain_for(kMatmulGrain, w.cols * n), [&](int64_t begin, int64_t end, int thread) {
    with_gguf_rows(w, begin, end, thread, [&](const uint8_t* rows, int64_t first, int64_t count) {
      gemm_int16(w.type, rows, w.row_stride, w.cols, count, packed_.data(), n, y + first, w.rows,
                 matmul_scratch_[static_cast<size_t>(thread)].data());
    });
  });
}

void ForwardPass::project(const WeightMatrix& w, const LayerDeltas* deltas, Projection p, const float* x,
                          int64_t n, float* y, Input input) {
  linear(w, x, n, y, input);
  if (deltas != nullptr) add_low_rank_delta((*deltas)[static_cast<size_t>(p)], x, n, y, delta_scratch_);
}

template <class Fn>
void ForwardPass::for_rows(int64_t n, int64_t row_work, const Fn& fn) {
  pool_.parallel_for(n, grain_for(1, row_work), [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

void ForwardPass::add_bias(const std::vector<float>& bias, float* y, int64_t n, int64_t width) {
  if (bias.empty()) return;
  for_rows(n, width, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) add_f32(bias.data(), y + i * width, width);
  });
}

void ForwardPass::normalize(const std::vector<float>& weight, int64_t first, int64_t n, float* out) {
  const int64_t e = config_.n_embd;
  for_rows(n, e, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      rms_norm_f32(x_.data() + (first + i) * e, weight.data(), config_.rms_eps, out + i * e, e);
    }
  });
}

void ForwardPass::embed(const int32_t* tokens, int64_t n, int64_t first) {
  const WeightMatrix& e = weights_.token_embd;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= e.rows) {
      fail("token id {} is out of the vocabulary (0..{})", tokens[i], e.rows - 1);
    }
  }
  for_rows(n, config_.n_embd, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      dequantize_row(e.type, e.row(tokens[i]), x_.data() + (first + i) * config_.n_embd, config_.n_embd);
    }
  });
}

void ForwardPass::attention_block(int64_t layer, int64_t n, std::span<const ForwardSegment> segments,
                                  const LayerDeltas* deltas) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  normalize(w.attn_norm, 0, n, norm_.data());
  project(w.wq, deltas, Projection::kQ, norm_.data(), n, q_.data());
  project(w.wk, deltas, Projection::kK, norm_.data(), n, k_.data(), Input::kSameAsLast);
  project(w.wv, deltas, Projection::kV, norm_.data(), n, v_.data(), Input::kSameAsLast);
  add_bias(w.bq, q_.data(), n, c.q_dim());
  add_bias(w.bk, k_.data(), n, c.kv_dim());
  add_bias(w.bv, v_.data(), n, c.kv_dim());

  const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
  for_rows(n, c.q_dim() + c.kv_dim(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
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
  });

  int64_t first = 0;
  for (const ForwardSegment& segment : segments) {
    attend(layer, segment, first);
    first += segment.n;
  }

  project(w.wo, deltas, Projection::kO, attn_out_.data(), n, norm_.data());
  add_residual(n);
}

void ForwardPass::attend(int64_t layer, const ForwardSegment& segment, int64_t first) {
  const ModelConfig& c = config_;
  KvCache& cache = *segment.cache;
  cache.append(layer, k_.data() + first * c.kv_dim(), v_.data() + first * c.kv_dim(), segment.positions, segment.n,
               &pool_);
  for (int64_t g = 0; g < c.n_head_kv; ++g) {
    kv_views_[static_cast<size_t>(g)] = cache.view(layer, g);
  }
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  const float* queries = q_.data() + first * c.q_dim();
  const bool tapped = segment.attention_tap != nullptr && *segment.attention_tap;
  attention_scratch_.keep_decode_probabilities = tapped;  // the observers' probabilities, computed once
  attention(queries, segment.n, shape, kv_views_, attn_out_.data() + first * c.q_dim(), attention_scratch_, pool_);
  if (tapped) {
    (*segment.attention_tap)(AttentionEvent{layer, segment.n, segment.positions, queries, shape, kv_views_, rotary_, pool_,
                                            segment.n == 1 ? &attention_scratch_.decode_probabilities : nullptr,
                                            segment.phase, segment.step});
  }
  if (segment.layer_done != nullptr && *segment.layer_done) (*segment.layer_done)(layer);
}

void ForwardPass::feed_forward_block(int64_t layer, int64_t n, const LayerDeltas* deltas) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  normalize(w.ffn_norm, 0, n, norm_.data());
  project(w.w_gate, deltas, Projection::kGate, norm_.data(), n, gate_.data());
  project(w.w_up, deltas, Projection::kUp, norm_.data(), n, up_.data(), Input::kSameAsLast);
  for_rows(n, c.n_ff, [&](int64_t begin, int64_t end) {
    swiglu_f32(gate_.data() + begin * c.n_ff, up_.data() + begin * c.n_ff, (end - begin) * c.n_ff);
  });
  project(w.w_down, deltas, Projection::kDown, gate_.data(), n, norm_.data());
  add_residual(n);
}

void ForwardPass::add_residual(int64_t n) {
  const int64_t e = config_.n_embd;
  for_rows(n, e, [&](int64_t begin, int64_t end) {
    add_f32(norm_.data() + begin * e, x_.data() + begin * e, (end - begin) * e);
  });
}

void ForwardPass::run(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
                      bool all_logits, float* logits, PassPhase phase) {
  const ForwardSegment segment{tokens, positions, n, &cache, &tap_, &residual_tap_, logits, all_logits, phase};
  run(std::span(&segment, 1));
}

void ForwardPass::run(std::span<const ForwardSegment> segments) {
  int64_t n = 0;
  bool one_token_each = true;
  for (const ForwardSegment& s : segments) {
    if (s.n <= 0) fail("internal: a segment of {} tokens", s.n);
    one_token_each = one_token_each && s.n == 1;
    n += s.n;
  }
  if (n <= 0 || n > max_batch_) fail("internal: batch of {} tokens (max {})", n, max_batch_);
  positions_.resize(static_cast<size_t>(n));
  int64_t first = 0;
  for (const ForwardSegment& s : segments) {
    embed(s.tokens, s.n, first);
    std::copy_n(s.positions, s.n, positions_.data() + first);
    first += s.n;
  }
  rows_by_matvec_ = one_token_each;
  run_layers(positions_.data(), n, segments, nullptr);
  finish(segments);
  rows_by_matvec_ = false;
}

void ForwardPass::finish(std::span<const ForwardSegment> segments) {
  int64_t first = 0;
  for (const ForwardSegment& s : segments) {
    if (s.residual_tap != nullptr && *s.residual_tap) {
      (*s.residual_tap)(ResidualEvent{s.n, s.positions, x_.data() + first * config_.n_embd, config_.n_embd, pool_});
    }
    first += s.n;
  }
  output_logits(segments);
}

void ForwardPass::run_prompt(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
                             bool all_logits, float* logits, const LayerDone& layer_done, PassPhase phase) {
  begin_prompt(tokens, positions, n, cache, all_logits, logits, phase);
  try {
    while (prompt_running()) {
      const std::optional<int64_t> layer = run_prompt_chunk();
      if (layer && layer_done) layer_done(*layer);
    }
  } catch (...) {
    end_prompt();
    throw;
  }
}

void ForwardPass::begin_prompt(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
                               bool all_logits, float* logits, PassPhase phase) {
  if (n <= 0) fail("internal: a prompt of {} tokens", n);
  if (prompt_running()) fail("internal: a prompt begins while another is running");
  stream_.resize(static_cast<size_t>(n * config_.n_embd));
  build_rope_table(positions, n, config_.n_rot, config_.rope_base, config_.rope_linear_scale,
                   weights_.rope_freq_factors, prompt_rope_);
  prompt_ = {tokens, positions, n, &cache, all_logits, logits, phase, 0, 0};
}

std::optional<int64_t> ForwardPass::run_prompt_chunk() {
  if (!prompt_running()) fail("internal: no prompt is running");
  const ModelConfig& c = config_;
  const int64_t e = c.n_embd;
  PromptCursor& p = prompt_;
  const int64_t layer = p.layer, first = p.first;
  // Chunk by chunk, in order: each chunk's rows attend to the layer's entries of the chunks
  // before it, as in run().
  const int64_t m = std::min(max_batch_, p.n - first);
  const bool last_chunk = first + m == p.n;
  float* out = p.logits == nullptr ? nullptr
               : p.all_logits      ? p.logits + first * c.n_vocab
               : last_chunk        ? p.logits
                                   : nullptr;
  const ForwardSegment chunk{p.tokens + first, p.positions + first, m, p.cache, &tap_, &residual_tap_, out,
                             p.all_logits, p.phase};
  float* rows = stream_.data() + first * e;
  if (layer == 0) {
    embed(p.tokens + first, m, 0);
  } else {
    std::copy_n(rows, m * e, x_.data());
  }
  use_prompt_rope(first, m);
  attention_block(layer, m, std::span(&chunk, 1), nullptr);
  feed_forward_block(layer, m, nullptr);
  if (layer + 1 < c.n_layer) {
    std::copy_n(x_.data(), m * e, rows);
  } else {
    finish(std::span(&chunk, 1));
  }
  if (!last_chunk) {
    p.first += m;
    return std::nullopt;
  }
  p.first = 0;
  if (++p.layer == c.n_layer) end_prompt();
  return layer;
}

void ForwardPass::end_prompt() {
  prompt_ = {};
  // A long prompt's stream is large (n x n_embd floats) and a session may hold its pass for
  // a long time after: it is not kept for the next prompt.
  stream_ = {};
}

void ForwardPass::use_prompt_rope(int64_t first, int64_t n) {
  const int64_t pairs = prompt_rope_.n_pairs;
  rope_.n_pairs = pairs;
  rope_.cos.assign(prompt_rope_.cos.begin() + first * pairs, prompt_rope_.cos.begin() + (first + n) * pairs);
  rope_.sin.assign(prompt_rope_.sin.begin() + first * pairs, prompt_rope_.sin.begin() + (first + n) * pairs);
}

void ForwardPass::output_logits(std::span<const ForwardSegment> segments) {
  const int64_t e = config_.n_embd;
  const int64_t n_vocab = weights_.output.rows;
  // The rows that want logits, normalised side by side into norm_.
  int64_t rows = 0;
  int64_t first = 0;
  int64_t wanting = 0;
  for (const ForwardSegment& s : segments) {
    if (s.logits != nullptr) {
      const int64_t count = s.all_logits ? s.n : 1;
      normalize(weights_.output_norm, first + s.n - count, count, norm_.data() + rows * e);
      rows += count;
      ++wanting;
    }
    first += s.n;
  }
  if (wanting == 0) return;
  if (wanting == 1) {  // straight into its logits
    for (const ForwardSegment& s : segments) {
      if (s.logits != nullptr) linear(weights_.output, norm_.data(), rows, s.logits);
    }
    return;
  }
  if (logits_scratch_.size() < static_cast<size_t>(rows * n_vocab)) logits_scratch_.resize(static_cast<size_t>(rows * n_vocab));
  linear(weights_.output, norm_.data(), rows, logits_scratch_.data());
  rows = 0;
  for (const ForwardSegment& s : segments) {
    if (s.logits == nullptr) continue;
    const int64_t count = s.all_logits ? s.n : 1;
    std::copy_n(logits_scratch_.data() + rows * n_vocab, count * n_vocab, s.logits);
    rows += count;
  }
}

void ForwardPass::run_rows(const LookaheadRows& rows, int64_t first, const int32_t* positions, int64_t n,
                           KvCache& cache, PassPhase phase) {
  if (n <= 0 || n > max_batch_) fail("internal: batch of {} rows (max {})", n, max_batch_);
  const ModelConfig& c = config_;
  check_rows_fit(rows, first, n, c, weights_);
  std::copy_n(rows.embeddings.data() + first * c.n_embd, n * c.n_embd, x_.data());
  const ForwardSegment segment{.tokens = nullptr, .positions = positions, .n = n, .cache = &cache, .attention_tap = &tap_,
                               .phase = phase};
  run_layers(positions, n, std::span(&segment, 1), &rows);
}

void ForwardPass::run_layers(const int32_t* positions, int64_t n, std::span<const ForwardSegment> segments,
                             const LookaheadRows* rows) {
  const ModelConfig& c = config_;
  build_rope_table(positions, n, c.n_rot, c.rope_base, c.rope_linear_scale,
                   weights_.rope_freq_factors, rope_);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const LayerDeltas* layer_deltas = rows != nullptr ? &rows->layers[static_cast<size_t>(layer)] : nullptr;
    attention_block(layer, n, segments, layer_deltas);
    feed_forward_block(layer, n, layer_deltas);
  }
}

}  // namespace deferkv
