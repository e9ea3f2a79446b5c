#pragma once
// Float32 matrix product against row-major weights (the layout matmul's dequantised
// tiles and F32 weights have): y[i * ldy + j] = dot(x row i, w row j) for i in [0, m),
// j in [0, rows), rows of n values, x rows ldx floats apart, w rows ldw apart.
// Single-threaded, like the matvec kernels.
#include <cstdint>

namespace deferkv {

void gemm_f32_nt(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t rows, int64_t n,
                 float* y, int64_t ldy);

}  // namespace deferkv
