// Scalar fp16/bf16 <-> fp32 conversions, exact for every input (subnormals, inf, NaN).
// The SIMD kernels convert whole vectors with Highway; these are for scales and tests.
#include <bit>
#include <cstdint>

#include "kernels/quant.h"

namespace deferkv {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet
    return sign | 0x7e00 | static_cast<uint16_t>((magnitude >> 13) & 0x3ff);
  }
  // 65520 is halfway between 65504 (the largest half) and 65536; ties-to-even
  // rounds it up, so everything from there on is infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00;
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the result is subnormal, a multiple of 2^-24. Adding 0.5 (whose ulp
    // is 2^-24) lets the FPU do the round-to-nearest-even for us.
    const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even; a carry out of the
  // mantissa correctly bumps the exponent.
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded >> 13) - (112u << 10));
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN; truncation could make it inf
  }
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
}

}  // namespace deferkv
