#pragma once
// The prefill product for quantised weights in integers (gemm_int16.cpp):
// y[i * ldy + r] = dot(weight row r, x_i) for m tokens x_i, with the weights decoded to
// int16 a tile of rows at a time (int16_rows.h) and the activations quantised to int16
// blocks exactly as pack_activation does for the matvec kernels (packed_activation.h).
// Each block of a row's dot product is an exact int32 sum, scaled once in float32; the
// blocks are summed in order, so a result does not depend on m, on the other tokens or
// rows, or on how rows are split between threads. Against matmul's float32 GEMM it skips
// the dequantisation to float, and it runs on AVX-512 VNNI's vpdpwssd where the CPU has
// it: 32 multiply-adds per instruction against 16 for float32 FMA.
//
// On AVX2 without AVX-512, K-quant weights (Q4_K, Q5_K, Q6_K) stay bytes instead and meet
// tokens quantised to int8 (the form their decode matvecs take, packed_activation.h) in
// vpmaddubsw, twice the multiply-adds of vpmaddwd (gemm_int16_takes_int8); each block's
// sum is exact in int32 as well.
//
// The activations go first into token panels (gemm_int16_pack_tokens), once per product
// and shared by every thread: panel p holds tokens [p * T, p * T + T) with
// T = gemm_int16_panel_tokens() (two vectors of int32 lanes), value pairs of all T
// tokens side by side, so that one vector load gives the same pair of every token.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace deferkv {

// Whether the prefill of m tokens of n values against `weight_type` weights goes through
// gemm_int16 on this CPU: its type has integer rows, the CPU is x86 with AVX2 or better
// (Q8_0: AVX-512, as matmul's float32 GEMM is faster for it on AVX2), and m reaches the
// threshold; or BF16 weights on a CPU with AVX-512 BF16 (below).
bool gemm_int16_serves(DType weight_type, int64_t n, int64_t m);

// BF16 weights on a CPU with AVX-512 BF16 (Zen 4, Sapphire Rapids) take the same route
// with the tokens rounded to bf16, summed in float32 by vdpbf16ps (twice FMA's
// multiply-adds), as llama.cpp does for them: a prompt's logits then carry the tokens'
// bf16 rounding (about 1e-3 relative), where decode keeps float32 tokens. kF32 keeps every
// BF16 prefill on the float32 GEMM instead; DEFERKV_BF16_ACTIVATION=bf16|f32 in the
// environment picks it, read on first use (docs/cli.md).
enum class Bf16Activation { kBf16, kF32 };
inline constexpr const char* kBf16ActivationVariable = "DEFERKV_BF16_ACTIVATION";
// "bf16" or "f32" (any case); error naming the known values otherwise.
Bf16Activation parse_bf16_activation(const std::string& name);
Bf16Activation bf16_activation();
// Overrides the setting for the whole process (tests).
void set_bf16_activation(Bf16Activation form);
// Whether BF16 prompts take bf16 tokens here now (the setting, the CPU and the target).
bool gemm_int16_takes_bf16();

int64_t gemm_int16_panel_tokens();
// The instruction set gemm_int16 runs on now (Highway's name: "AVX2", "AVX3", "AVX3_DL"):
// which form a type takes depends on it. A sanitizer build compiles the kernels for the
// machine's own set only (cmake/layers.cmake), whatever a test forces.
const char* gemm_int16_target();
// Whether the tokens for `weight_type` weights are quantised to int8 rather than int16 on
// this CPU now (the K-quants on AVX2, under KQuantActivation::kInt8, matvec.h). The
// packing and the product read it each call: never change the setting between them.
bool gemm_int16_takes_int8(DType weight_type);
// Bytes the token panels of m tokens of n values take.
size_t gemm_int16_tokens_bytes(DType weight_type, int64_t n, int64_t m);
// Quantises tokens and writes panels [first_panel, first_panel + panels) of the m tokens
// (rows of x, ldx floats apart) into `out` (all panels, gemm_int16_tokens_bytes); tokens
// past m are zeros.
void gemm_int16_pack_tokens(DType weight_type, const float* x, int64_t ldx, int64_t n, int64_t m,
                            int64_t first_panel, int64_t panels, void* out);

// Bytes of the per-thread scratch that gemm_int16 decodes weight tiles into.
size_t gemm_int16_scratch_bytes(DType weight_type, int64_t n);
// y[i * ldy + r] = dot(row r, x_i) for i < m and r < rows (rows row_stride bytes apart),
// the tokens as gemm_int16_pack_tokens left them. Single-threaded; split rows across threads.
void gemm_int16(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
                const void* tokens, int64_t m, float* y, int64_t ldy, void* scratch);

}  // namespace deferkv
