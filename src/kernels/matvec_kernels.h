#pragma once
// The per-type matvec kernels behind matvec() (each in its own matvec_<type>.cpp, compiled
// for several instruction sets and dispatched at run time). Same contract as matvec():
// y[r] = dot(row r of w, x) for r in [0, rows), rows row_stride bytes apart; `packed` is
// the output of pack_activation for the type.
#include <cstddef>
#include <cstdint>

namespace deferkv {

void matvec_f32(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_f16(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_bf16(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_q8_0(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_q4_0(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_q4_k(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_q5_k(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);
void matvec_q6_k(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows);

// Quantises x into the PackedActivation layout (packed_activation.h) with blocks of `block`.
void pack_int16_blocks(const float* x, int64_t n, int block, void* packed);

}  // namespace deferkv
