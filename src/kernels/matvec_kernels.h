#pragma once
// The per-type matvec kernels behind matvec() and matvec_rows() (each in its own
// matvec_<type>.cpp, compiled for several instruction sets and dispatched at run time).
// Same contract as matvec_rows(): y[i * ldy + r] = dot(row r of w, x_i) for i in [0, m)
// and r in [0, rows), rows row_stride bytes apart; `packed` holds the m outputs of
// pack_activation for the type, packed_stride bytes apart.
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace deferkv {

void matvec_f32(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_f16(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_bf16(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_q8_0(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_q4_0(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_q4_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_q5_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
void matvec_q6_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                 int64_t m, float* y, int64_t ldy, int64_t rows);
// Q4_K weights against the int8 form of the activation (packed_activation.h).
void matvec_q4_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows);

// Q5_K weights against the int8 form of the activation (matvec_k4_int8.cpp, with Q4_K's).
void matvec_q5_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows);
// Q6_K weights against the int8 form of the activation.
void matvec_q6_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows);

// The SIMD matvec over row groups (matvec_row_groups.cpp; contract: matvec_row_groups in
// row_groups.h), and whether the dispatched target has it (x86 with AVX2 or better).
void matvec_row_groups_simd(DType type, const void* groups, int64_t n, const void* packed, size_t packed_stride,
                            int64_t m, float* y, int64_t ldy, int64_t rows);
bool row_groups_simd_available();

// Quantises x into the PackedActivation layout (packed_activation.h) with blocks of `block`.
void pack_int16_blocks(const float* x, int64_t n, int block, void* packed);
// Quantises x into the PackedActivationInt8 layout with blocks of `block` (256, or 32).
void pack_int8_blocks(const float* x, int64_t n, void* packed, int block = 256);

}  // namespace deferkv
