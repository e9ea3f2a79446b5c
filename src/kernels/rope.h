#pragma once
// Rotary position embeddings.
#include <cstdint>
#include <vector>

namespace deferkv {

// cos/sin of every rotated pair for a list of positions: [n_positions, n_rot/2] each.
struct RopeTable {
  int64_t n_pairs = 0;
  std::vector<float> cos;
  std::vector<float> sin;
};

// theta(p, i) = p * position_scale * base^(-2i / n_rot) / freq_factors[i]
// (freq_factors may be empty: all 1).
void build_rope_table(const int32_t* positions, int64_t n_positions, int64_t n_rot, float base,
                      float position_scale, const std::vector<float>& freq_factors, RopeTable& table);

// Rotates the first n_rot dims of each of n_heads heads of one token's vector.
// interleaved: pairs (2i, 2i+1); otherwise NeoX pairs (i, i + n_rot/2).
void apply_rope(float* x, int64_t n_heads, int64_t head_dim, const RopeTable& table,
                int64_t position_index, bool interleaved);

// A model's RoPE as a value, for rotating vectors outside the forward pass: presses
// move queries to other positions (a negative position undoes a rotation).
struct Rotary {
  int64_t n_rot = 0;
  float base = 10000.0f;
  float position_scale = 1.0f;
  std::vector<float> freq_factors;
  bool interleaved = false;

  // Rotates the first n_rot dims of each of n_heads heads of x as at `position`.
  void rotate(float* x, int64_t n_heads, int64_t head_dim, int32_t position) const;
};

}  // namespace deferkv
