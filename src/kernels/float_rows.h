#pragma once
// Whole rows of fp16 / bf16 / q8_0 / q4_0 to float32 with SIMD (dequantize_row's cases
// for them; matmul dequantises entire weight matrices through them, the attention kernels
// tiles of a KV cache). Bit for bit the scalar conversions' results.
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace deferkv {

void fp16_row_to_fp32(const uint16_t* src, float* dst, int64_t n);
void bf16_row_to_fp32(const uint16_t* src, float* dst, int64_t n);
void q8_0_row_to_fp32(const BlockQ8_0* blocks, float* dst, int64_t n_blocks);
void q4_0_row_to_fp32(const BlockQ4_0* blocks, float* dst, int64_t n_blocks);

}  // namespace deferkv
