#pragma once
// The geometry half of Compactor [docs/methods/leverage.md], shared by the `leverage` and
// `compactor` methods: approximate statistical leverage scores of a head's pre-RoPE keys
// under a seeded right Gaussian sketch, and the layer-wide z-normalisation kvpress applies
// to its Compactor scores (also used by `non_causal_attention`).
#include <cstdint>
#include <vector>

namespace deferkv {

class KvCache;
struct Rotary;

// Which sketch: one stream per (seed, layer, KV head, eviction), as the random method's.
struct SketchSeed {
  int64_t seed;
  int64_t layer;
  int64_t kv_head;
  int64_t next_position;  // the eviction enters by the position after the newest entry
};

// Phi [d x k] row-major, entries N(0, 1) / sqrt(k): mt19937_64 seeded by
// seed_seq{seed, layer, kv_head, next_position}, one standard normal per two draws (Box-Muller,
// cosine branch: u1 = (a + 1) / 2^53, u2 = b / 2^53 from the top 53 bits of draws a, b),
// filled row by row. Fully specified, so the test re-derives it.
std::vector<double> gaussian_sketch(const SketchSeed& seed, int64_t d, int64_t k);

// Leverage scores of entries [from, to) of head g in `layer`: the keys with RoPE undone
// (each rotated back by its position), centred on their mean, sketched X = (K - mean) Phi,
// and l_j = x_j^T (X^T X + jitter I)^-1 x_j, clamped at 0 (kvpress's Cholesky with jitter
// 1e-2, raised tenfold while the factorisation fails, five tries). Returns to - from values.
std::vector<double> leverage_scores(const KvCache& cache, const Rotary& rotary, int64_t layer, int64_t g,
                                    int64_t from, int64_t to, const std::vector<double>& sketch, int64_t k);

// (s - mean) / max(std, 1e-6) over every value of every head of one layer, std with
// Bessel's correction (torch's default): kvpress normalises the whole layer's tensor at once.
void z_normalise_layer(std::vector<std::vector<double>>& scores);

}  // namespace deferkv
