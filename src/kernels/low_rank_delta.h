#pragma once
// A low-rank (LoRA) update of one linear projection: y += scale * B (A x), with A
// [rank x in] and B [out x rank] stored row-major in float32 and scale = alpha / rank.
// It applies to a few rows (LookaheadKV's lookahead rows): two thin products, n x rank
// then n x out, single-threaded.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace deferkv {

struct LowRankDelta {
  int64_t rank = 0;  // 0: no delta
  int64_t in = 0;
  int64_t out = 0;
  float scale = 1.0f;
  std::vector<float> a;  // [rank x in]
  std::vector<float> b;  // [out x rank]

  bool empty() const { return rank == 0; }
};

// For each of the n rows: y[i] += scale * B (A x[i]); x is [n x in], y is [n x out].
// `scratch` grows to n * (rank + out) floats and is reused by later calls.
void add_low_rank_delta(const LowRankDelta& delta, const float* x, int64_t n, float* y,
                        std::vector<float>& scratch);

}  // namespace deferkv
