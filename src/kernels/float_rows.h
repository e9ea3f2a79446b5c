#pragma once
// Whole rows of fp16 / bf16 to float32 with SIMD (dequantize_row's F16 and BF16 cases;
// matmul dequantises entire weight matrices through them).
#include <cstdint>

namespace deferkv {

void fp16_row_to_fp32(const uint16_t* src, float* dst, int64_t n);
void bf16_row_to_fp32(const uint16_t* src, float* dst, int64_t n);

}  // namespace deferkv
