#include "kernels/low_rank_delta.h"

#include "kernels/gemm.h"
#include "kernels/vec.h"

namespace deferkv {

void add_low_rank_delta(const LowRankDelta& delta, const float* x, int64_t n, float* y,
                        std::vector<float>& scratch) {
  if (delta.empty()) return;
  const int64_t r = delta.rank;
  if (static_cast<int64_t>(scratch.size()) < n * (r + delta.out)) {
    scratch.resize(static_cast<std::size_t>(n * (r + delta.out)));
  }
  float* low = scratch.data();           // [n x rank]: scale * A x
  float* update = scratch.data() + n * r;  // [n x out]: B (scale * A x)
  gemm_f32_nt(x, delta.in, n, delta.a.data(), delta.in, r, delta.in, low, r);
  scale_f32(delta.scale, low, n * r);
  gemm_f32_nt(low, r, n, delta.b.data(), r, delta.out, r, update, delta.out);
  add_f32(update, y, n * delta.out);
}

}  // namespace deferkv
