#pragma once
// A naive double-precision transformer forward, written to be read (like llama2.c)
// rather than to be fast: the independent reference the engine is tested against.
// Weights are dequantised to double; every step follows the textbook formula.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace deferkv::testing {

// Logits of every position for `tokens` fed from position 0: [tokens.size()][n_vocab].
std::vector<std::vector<double>> reference_logits(const std::string& gguf_path,
                                                  const std::vector<int32_t>& tokens);

// What a cache stores of a key (is_key) or value row of kv_dim values in `layer`: attention
// then reads the stored rows. For references of caches that round what they store.
using KvStorage = std::function<std::vector<double>(const std::vector<double>& row, bool is_key, int64_t layer)>;

// Whether the query at query_position sees the key at key_position in (layer, KV head);
// causality is applied on top. For dense-masked references of compressed caches.
using KeyVisibility = std::function<bool(int64_t layer, int64_t kv_head, int64_t key_position,
                                         int64_t query_position)>;
std::vector<std::vector<double>> reference_logits(const std::string& gguf_path,
                                                  const std::vector<int32_t>& tokens,
                                                  const KeyVisibility& visible, const KvStorage& store = {});

// Rows fed after the tokens as input embeddings (LookaheadKV's lookahead rows), at the
// next positions, with a low-rank delta added to each projection for these rows only:
// W x + scale * B (A x).
struct ReferenceDelta {
  std::vector<std::vector<double>> a;  // [rank][in]; empty: no delta
  std::vector<std::vector<double>> b;  // [out][rank]
  double scale = 0;
};
struct ReferenceRows {
  std::vector<std::vector<double>> embeddings;  // [n_rows][n_embd]
  // [layer][projection], projections in the order q, k, v, o, gate, up, down; empty: none.
  std::vector<std::array<ReferenceDelta, 7>> deltas;
};

// Every position's queries and keys (after RoPE) and values in every layer, and its logits.
struct ReferenceTrace {
  std::vector<std::vector<std::vector<double>>> queries;  // [layer][position][n_head * head_dim]
  std::vector<std::vector<std::vector<double>>> keys;     // [layer][position][n_head_kv * head_dim]
  std::vector<std::vector<std::vector<double>>> values;   // [layer][position][n_head_kv * head_dim]
  std::vector<std::vector<double>> residuals;             // [position][n_embd], input of the final norm
  std::vector<std::vector<double>> logits;                // [position][n_vocab]
};
// The tokens from position 0, then the rows.
ReferenceTrace reference_trace(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                               const ReferenceRows& rows);
// The tokens from position 0, each query seeing only the keys `visible` allows.
ReferenceTrace reference_trace(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                               const KeyVisibility& visible);
// The final residual stream (the input of the final RMSNorm) of every position:
// [tokens.size()][n_embd]; visible as for reference_logits (may be empty: all).
std::vector<std::vector<double>> reference_final_residuals(const std::string& gguf_path,
                                                           const std::vector<int32_t>& tokens,
                                                           const KeyVisibility& visible);
// W_U RMSNorm(residual): the logits of a final residual.
std::vector<double> reference_logits_of_residual(const std::string& gguf_path, const std::vector<double>& residual);

// Each KV head's key shift by layer (KvCache's, kv_cache.h): [layer][kv_head], head_dim
// values or empty for none. Empty: no head has one.
using KeyShifts = std::vector<std::vector<std::vector<double>>>;

// The storage of a cache of `type` (a tensor type) for heads of head_dim values: each
// head's row rounded to float32, then to the type and back (dequantise-then-f64). q8_0
// and q4_0 rows are stored as KvCache stores them: x - shift (keys), rotated by the
// Walsh-Hadamard matrix H (built here from its definition) over the largest power of two
// that divides head_dim, rounded, and H row + shift.
KvStorage rounded_as(DType type, int64_t head_dim, const KeyShifts& key_shifts = {});

// A tensor of the model dequantised to double, as rows of its ne[0] values (for a
// projection W [out x in]: out rows of in values, e.g. blk.L.attn_output.weight).
std::vector<std::vector<double>> reference_tensor(const std::string& gguf_path, const std::string& name);

// Relative L2 error ||a - b|| / ||b||.
double relative_l2(const float* a, const std::vector<double>& b);

}  // namespace deferkv::testing
