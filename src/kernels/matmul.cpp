// matmul (prefill): weights are dequantised a tile of rows at a time into `scratch`, packed
// into panels (F32 and F16 weights straight from the model, F16 kept F16) and multiplied
// with gemm_f32_packed (gemm_f16_packed) by the tokens the caller packed.
// Below a per-type token count the matvec kernels run on each token instead, which is
// cheaper than dequantising. The forward pass sends quantised weights to gemm_int16
// instead wherever it serves them (gemm_int16.h: x86 with AVX2 or better); this path
// remains theirs on other CPUs, and Q8_0's on AVX2.
#include <cblas.h>

#include <algorithm>

#include "deferkv/error.h"
#include "kernels/gemm.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

// Fewer tokens than this go through matvec. The GEMM route runs at ~90-120 GFLOP/s but
// first dequantises and packs the whole matrix (10-15 ms for 4096 x 4096 quantised
// weights, a few ms for F16/BF16/F32); the matvec route runs at ~55-75 GFLOP/s (F32:
// ~40) from the first token. Crossovers measured with kernels_bench's matmul_small_m
// sweep (4096 x 4096, single thread) when the GEMM was OpenBLAS sgemm (~90 GFLOP/s);
// with the packed GEMM (gemm_packed.cpp) they may be somewhat lower.
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

// Weight rows dequantised and packed at a time: a tile of up to 128 KiB (rows x n
// floats), so that its packing stays in L2 while every block of tokens runs against it
// (gemm_packed.cpp); the activations are read once per tile. At pp512 on the 100M models
// (n = 768 and 2048, 2 threads) 128 KiB tiles ran 2-4% faster than 1 MiB, which was
// best for gemm_f32_nt's whole-row tiles, and as fast as 64 KiB. A multiple of the widest
// panel, so that only the last tile has a partial panel.
int64_t tile_rows(int64_t n) {
  return std::max<int64_t>(kGemmMaxPanelRows, (128 << 10) / 4 / n / kGemmMaxPanelRows * kGemmMaxPanelRows);
}

// The scratch holds the dequantised tile, then its packing.
size_t tile_floats(int64_t rows, int64_t n) { return static_cast<size_t>(std::min(rows, tile_rows(n)) * n); }

// The small-m path: pack the m tokens into scratch, then the multi-row matvec kernels
// (each weight block read and decoded once per group of tokens).
void matmul_by_matvec(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
                      const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy, float* scratch) {
  auto* packed = reinterpret_cast<unsigned char*>(scratch);
  const size_t stride = packed_activation_stride(weight_type, n);
  for (int64_t i = 0; i < m; ++i) pack_activation(weight_type, x + i * ldx, n, packed + i * stride);
  matvec_rows(weight_type, weights, row_stride, n, packed, stride, m, y, ldy, rows);
}

// Packs a tile of `count` rows into float32 panels at `packed`: F32 rows straight from the
// model, any other type dequantised into `scratch` first.
void pack_tile_f32(DType weight_type, const unsigned char* rows, size_t row_stride, int64_t n, int64_t count,
                   float* scratch, float* packed) {
  if (weight_type == DType::F32 && row_stride % sizeof(float) == 0) {
    gemm_pack_rows(reinterpret_cast<const float*>(rows), static_cast<int64_t>(row_stride / sizeof(float)), count,
                   n, packed);
    return;
  }
  for (int64_t r = 0; r < count; ++r) dequantize_row(weight_type, rows + r * row_stride, scratch + r * n, n);
  gemm_pack_rows(scratch, n, count, n, packed);
}

}  // namespace

bool matmul_by_gemm(DType weight_type, int64_t m) { return m >= min_tokens_for_gemm(weight_type); }

void init_blas_single_threaded() { openblas_set_num_threads(1); }

size_t scratch_floats_for_matmul(int64_t rows, int64_t n) {
  const size_t tile = tile_floats(rows, n) + gemm_packed_floats(std::min(rows, tile_rows(n)), n);
  size_t packed = 0;  // bytes for the tokens of the largest matvec-path batch
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K}) {
    packed = std::max(packed, packed_activation_stride(type, n) * static_cast<size_t>(min_tokens_for_gemm(type) - 1));
  }
  return std::max(tile, (packed + sizeof(float) - 1) / sizeof(float));
}

void matmul(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
            const float* x, int64_t ldx, const float* tokens, int64_t m, float* y, int64_t ldy, float* scratch) {
  if (!matmul_by_gemm(weight_type, m)) {
    matmul_by_matvec(weight_type, weights, row_stride, n, rows, x, ldx, m, y, ldy, scratch);
    return;
  }
  if (tokens == nullptr) fail("matmul: {} tokens take the GEMM, which needs them packed", m);
  const auto* w = static_cast<const unsigned char*>(weights);
  // F16 stays F16 in its panels: half the bytes to pack, and twice the k a block holds.
  const bool f16_panels = weight_type == DType::F16 && row_stride % sizeof(uint16_t) == 0;
  const int64_t tile = tile_rows(n);
  float* packed = scratch + tile_floats(rows, n);
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    const unsigned char* tile_start = w + r0 * row_stride;
    if (f16_panels) {
      auto* halves = reinterpret_cast<uint16_t*>(packed);
      gemm_pack_rows_f16(reinterpret_cast<const uint16_t*>(tile_start),
                         static_cast<int64_t>(row_stride / sizeof(uint16_t)), count, n, halves);
      gemm_f16_packed(tokens, m, halves, count, n, y + r0, ldy);
    } else {
      pack_tile_f32(weight_type, tile_start, row_stride, n, count, scratch, packed);
      gemm_f32_packed(tokens, m, packed, count, n, y + r0, ldy);
    }
  }
}

}  // namespace deferkv
