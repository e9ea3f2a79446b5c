#include "kernels/hadamard.h"

#include <cmath>

namespace deferkv {

void hadamard_blocks(float* x, int64_t n, int64_t order) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(order));
  for (float* block = x; block < x + n; block += order) {
    // log2(order) stages of butterflies (a, b) -> (a + b, a - b) over pairs `half` apart
    // (the fast transform: H_n is the Kronecker product of H_2s); the wide stages vectorise.
    for (int64_t half = 1; half < order; half *= 2) {
      for (int64_t start = 0; start < order; start += 2 * half) {
        for (int64_t i = start; i < start + half; ++i) {
          const float a = block[i], b = block[i + half];
          block[i] = a + b;
          block[i + half] = a - b;
        }
      }
    }
    for (int64_t i = 0; i < order; ++i) block[i] *= norm;
  }
}

}  // namespace deferkv
