#pragma once
// Matrix-vector and matrix-matrix products against weights stored in any DType.
// A weight matrix is `rows` rows of `n` elements each, row r at weights + r*row_stride
// bytes (ggml layout: output feature r is the dot of row r with the input).
// These functions are single-threaded; callers split rows across the thread pool.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace deferkv {

// The activation vector is converted once per matvec into the form the weight
// type's dot product consumes (integer blocks for quantised weights, see
// packed_activation.h; a float32 copy for F32/F16/BF16 weights).
size_t packed_activation_bytes(DType weight_type, int64_t n);
void pack_activation(DType weight_type, const float* x, int64_t n, void* packed);
// packed_activation_bytes rounded up to 64: the distance between consecutive packed
// activations handed to matvec_rows, so that each starts as aligned as the first.
size_t packed_activation_stride(DType weight_type, int64_t n);

// Which integer form the activation takes for K-quant weights (packed_activation.h):
// kInt8 (the default) multiplies the weights' bytes by int8 activations with x86's byte
// multiply-adds (maddubs, VNNI's vpdpbusd), kInt16 widens the weights to int16 instead
// (more precise activation, half the multiply-adds per instruction). Q4_K, Q5_K and Q6_K
// all have int8 kernels.
// DEFERKV_KQUANT_ACTIVATION=int16|int8 in the environment picks it, read on first use, so
// that the two can be timed side by side (docs/cli.md).
enum class KQuantActivation { kInt16, kInt8 };
inline constexpr const char* kKQuantActivationVariable = "DEFERKV_KQUANT_ACTIVATION";
// "int16" or "int8" (any case); error naming the known values otherwise.
KQuantActivation parse_kquant_activation(const std::string& name);
// The setting: $DEFERKV_KQUANT_ACTIVATION when set and not empty, else kInt8.
KQuantActivation kquant_activation();
// Overrides the setting for the whole process (tests); never between pack_activation and
// the matvec that reads its output.
void set_kquant_activation(KQuantActivation form);
// Whether pack_activation gives weights of this type the int8 form now (the types with an
// int8 kernel, under the setting kInt8).
bool takes_int8_activation(DType weight_type);

// y[r] = dot(W row r, x) for r in [0, rows).
void matvec(DType weight_type, const void* weights, size_t row_stride, int64_t n,
            const void* packed_x, float* y, int64_t rows);

// y[i * ldy + r] = dot(W row r, x_i) for i in [0, m), r in [0, rows): the m packed
// activations lie packed_stride bytes apart. Each weight block is loaded and decoded
// once for a group of activations instead of once per activation, and every y row is
// bit for bit what matvec gives for its x_i alone (the batch engine's decode rows rely
// on this: a sequence decodes the same in a batch as by itself).
void matvec_rows(DType weight_type, const void* weights, size_t row_stride, int64_t n, const void* packed_x,
                 size_t packed_stride, int64_t m, float* y, int64_t ldy, int64_t rows);

// Y[i, r] = dot(W row r, X[i, :]) for i in [0, m), r in [0, rows): X is m x n row-major
// (row stride ldx floats), Y is m x rows within a row-major matrix of row stride ldy.
// From a per-type token count on (matmul_by_gemm), the product is gemm_f32_packed's, which
// reads X as token panels (gemm_pack_tokens into `tokens`, packed once and shared by every
// thread's slice of rows); below it, X itself goes through the matvec kernels and
// `tokens` is not read (may be null).
// `scratch` must hold scratch_floats_for_matmul(rows, n) floats (at most 8 MiB for n up
// to about 30000); it receives the dequantised weight tile and its packing for
// gemm_f32_packed or, below the threshold, the packed activations of the m tokens.
bool matmul_by_gemm(DType weight_type, int64_t m);
size_t scratch_floats_for_matmul(int64_t rows, int64_t n);
void matmul(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
            const float* x, int64_t ldx, const float* tokens, int64_t m, float* y, int64_t ldy, float* scratch);

// Makes OpenBLAS run each call on the calling thread: deferkv's own pool splits rows
// across threads, each calling matmul on its share. Call once at start-up.
void init_blas_single_threaded();

}  // namespace deferkv
