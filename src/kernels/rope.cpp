#include "kernels/rope.h"

#include <cmath>

namespace deferkv {

void build_rope_table(const int32_t* positions, int64_t n_positions, int64_t n_rot, float base,
                      float position_scale, const std::vector<float>& freq_factors, RopeTable& table) {
  table.n_pairs = n_rot / 2;
  table.cos.resize(static_cast<size_t>(n_positions * table.n_pairs));
  table.sin.resize(table.cos.size());
  for (int64_t i = 0; i < table.n_pairs; ++i) {
    double inv_freq = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / n_rot);
    if (!freq_factors.empty()) inv_freq /= freq_factors[static_cast<size_t>(i)];
    for (int64_t t = 0; t < n_positions; ++t) {
      const double theta = static_cast<double>(positions[t]) * position_scale * inv_freq;
      table.cos[static_cast<size_t>(t * table.n_pairs + i)] = static_cast<float>(std::cos(theta));
      table.sin[static_cast<size_t>(t * table.n_pairs + i)] = static_cast<float>(std::sin(theta));
    }
  }
}

void apply_rope(float* x, int64_t n_heads, int64_t head_dim, const RopeTable& table,
                int64_t position_index, bool interleaved) {
  const int64_t n_pairs = table.n_pairs;
  const float* cs = table.cos.data() + position_index * n_pairs;
  const float* sn = table.sin.data() + position_index * n_pairs;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (int64_t i = 0; i < n_pairs; ++i) {
      float* a = interleaved ? head + 2 * i : head + i;
      float* b = interleaved ? head + 2 * i + 1 : head + i + n_pairs;
      const float x0 = *a;
      const float x1 = *b;
      *a = x0 * cs[i] - x1 * sn[i];
      *b = x0 * sn[i] + x1 * cs[i];
    }
  }
}

void Rotary::rotate(float* x, int64_t n_heads, int64_t head_dim, int32_t position) const {
  RopeTable table;
  build_rope_table(&position, 1, n_rot, base, position_scale, freq_factors, table);
  apply_rope(x, n_heads, head_dim, table, 0, interleaved);
}

}  // namespace deferkv
