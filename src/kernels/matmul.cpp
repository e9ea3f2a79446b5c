// matmul (prefill): weights are dequantised a tile of rows at a time into `scratch` and
// multiplied with gemm_f32_nt (F32 weights directly). Below a per-type token count the
// matvec kernels run on each token instead, which is cheaper than dequantising.
#include <cblas.h>

#include <algorithm>

#include "deferkv/error.h"
#include "kernels/gemm.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

// Fewer tokens than this go through matvec. The GEMM route runs at ~90-120 GFLOP/s but,
// except for F32, first dequantises the whole matrix (10-15 ms for 4096 x 4096 quantised
// weights, a few ms for F16/BF16); the matvec route runs at ~55-75 GFLOP/s (F32: ~40)
// from the first token. Crossovers measured with kernels_bench's matmul_small_m sweep
// (4096 x 4096, single thread) when the GEMM was OpenBLAS sgemm (~90 GFLOP/s); with
// gemm_f32_nt (~120 on AVX-512) they may be somewhat lower.
int64_t min_tokens_for_gemm(DType weight_type) {
  switch (weight_type) {
    case DType::F32: return 8;
    case DType::F16:
    case DType::BF16: return 32;
    case DType::Q6_K: return 64;
    case DType::Q8_0: return 96;
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q5_K: return 128;
  }
  fail("matmul: unsupported weight type {}", static_cast<uint32_t>(weight_type));
}

// Weight rows dequantised at a time: a tile of up to 1 MiB (rows x n floats) is still
// in L2 / L3 when gemm_f32_nt reads it. At pp512 on 100M-parameter models (n = 768 and
// 2048), 1 MiB tiles ran faster than 8 MiB (the tile then comes back from DRAM) and
// than 256 KiB (X, m x n, is read again for every tile).
int64_t tile_rows(int64_t n) { return std::max<int64_t>(16, (1 << 20) / 4 / n / 16 * 16); }

// The small-m path: pack the m tokens into scratch, then the multi-row matvec kernels
// (each weight block read and decoded once per group of tokens).
void matmul_by_matvec(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
                      const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy, float* scratch) {
  auto* packed = reinterpret_cast<unsigned char*>(scratch);
  const size_t stride = packed_activation_stride(weight_type, n);
  for (int64_t i = 0; i < m; ++i) pack_activation(weight_type, x + i * ldx, n, packed + i * stride);
  matvec_rows(weight_type, weights, row_stride, n, packed, stride, m, y, ldy, rows);
}

}  // namespace

void init_blas_single_threaded() { openblas_set_num_threads(1); }

size_t scratch_floats_for_matmul(int64_t rows, int64_t n) {
  const size_t tile = static_cast<size_t>(std::min(rows, tile_rows(n)) * n);
  size_t packed = 0;  // bytes for the tokens of the largest matvec-path batch
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K}) {
    packed = std::max(packed, packed_activation_stride(type, n) * static_cast<size_t>(min_tokens_for_gemm(type) - 1));
  }
  return std::max(tile, (packed + sizeof(float) - 1) / sizeof(float));
}

void matmul(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
            const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy, float* scratch) {
  if (m < min_tokens_for_gemm(weight_type)) {
    matmul_by_matvec(weight_type, weights, row_stride, n, rows, x, ldx, m, y, ldy, scratch);
    return;
  }
  const auto* w = static_cast<const unsigned char*>(weights);
  if (weight_type == DType::F32 && row_stride % sizeof(float) == 0) {
    gemm_f32_nt(x, ldx, m, reinterpret_cast<const float*>(w), static_cast<int64_t>(row_stride / sizeof(float)),
                rows, n, y, ldy);
    return;
  }
  const int64_t tile = tile_rows(n);
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    for (int64_t r = 0; r < count; ++r) {
      dequantize_row(weight_type, w + (r0 + r) * row_stride, scratch + r * n, n);
    }
    gemm_f32_nt(x, ldx, m, scratch, n, count, n, y + r0, ldy);
  }
}

}  // namespace deferkv
