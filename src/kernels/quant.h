#pragma once
// Conversions between float32 and the stored tensor types (block layouts as in ggml/GGUF).
#include <cstdint>

#include "tensor/dtype.h"

namespace deferkv {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept NaN

// Dequantises n values (n a multiple of the type's block size) from src into dst.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Quantises n values into the type's block layout (used by make-model and tests).
// The result is a valid block stream that any GGUF reader (ours or llama.cpp's) decodes.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace deferkv
