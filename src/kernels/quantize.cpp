// quantize_row: float32 to the block layouts of quant_blocks.h with round-to-nearest.
// Scales come from each (sub-)block's range; they are rounded to their stored precision
// before the values are quantised against them, so the stored scale is the one used.
// Not bit-identical to ggml's quantisers (which search for error-minimising scales),
// but every output is a valid block that any GGUF reader decodes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace deferkv {
namespace {

// round(x / scale) clamped to [lo, hi] (clamped as a float, so that no out-of-range
// value is converted to int); 0 when scale is 0, lo for NaN.
int quantize_value(float x, float scale, int lo, int hi) {
  if (scale == 0.0f) return std::clamp(0, lo, hi);
  const float rounded = std::nearbyint(x / scale);
  if (!(rounded >= static_cast<float>(lo))) return lo;
  return rounded > static_cast<float>(hi) ? hi : static_cast<int>(rounded);
}

// A sub-block scale (>= 0) as a multiple of d, rounded up so that the sub-block's range
// is never clipped (rounding to nearest would clip its extremes when rounding down).
int scale_units(float scale, float d, int max_units) {
  if (d == 0.0f) return 0;
  const float units = std::ceil(scale / d);
  return units < static_cast<float>(max_units) ? static_cast<int>(units) : max_units;
}

// The value of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

// Stores `value` as fp16 and returns what was stored.
float store_fp16(float value, uint16_t* out) {
  *out = fp32_to_fp16(value);
  return fp16_to_fp32(*out);
}

void quantize_q8_0(const float* x, BlockQ8_0* blocks, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQ32) {
    const float d = store_fp16(std::fabs(signed_absmax(x, kQ32)) / 127.0f, &blocks[b].d);
    for (int j = 0; j < kQ32; ++j) {
      blocks[b].qs[j] = static_cast<int8_t>(quantize_value(x[j], d, -127, 127));
    }
  }
}

// The extreme value maps to -8 so the full range [-8, 7] is used on its side.
void quantize_q4_0(const float* x, BlockQ4_0* blocks, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQ32) {
    const float d = store_fp16(signed_absmax(x, kQ32) / -8.0f, &blocks[b].d);
    for (int j = 0; j < 16; ++j) {
      const int lo = quantize_value(x[j], d, -8, 7) + 8;
      const int hi = quantize_value(x[j + 16], d, -8, 7) + 8;
      blocks[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Sub-block scales and mins for Q4_K/Q5_K (q in [0, qmax]): each sub-block of 32 spans
// [min(0, lowest), highest]. Fills d, dmin and the six-bit scales; returns q for all 256.
void quantize_k4_block(const float* x, int qmax, uint16_t* d_out, uint16_t* dmin_out,
                       uint8_t* scales_out, uint8_t q[kQK]) {
  float mins[8], highs[8];
  float max_min = 0.0f, max_scale = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* sub = x + 32 * j;
    mins[j] = -std::min(0.0f, *std::min_element(sub, sub + 32));
    highs[j] = std::max(0.0f, *std::max_element(sub, sub + 32));
    max_min = std::max(max_min, mins[j]);
    max_scale = std::max(max_scale, (highs[j] + mins[j]) / static_cast<float>(qmax));
  }
  const float dmin = store_fp16(max_min / 63.0f, dmin_out);
  const float d = store_fp16(max_scale / 63.0f, d_out);
  ScalesK4 s;
  for (int j = 0; j < 8; ++j) {
    s.m[j] = static_cast<uint8_t>(quantize_value(mins[j], dmin, 0, 63));
    // Fit the scale to the range above the min actually stored.
    const float offset = dmin * s.m[j];
    s.sc[j] = static_cast<uint8_t>(scale_units((highs[j] + offset) / qmax, d, 63));
    const float step = d * s.sc[j];
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = static_cast<uint8_t>(quantize_value(x[32 * j + l] + offset, step, 0, qmax));
    }
  }
  pack_scales_k4(s, scales_out);
}

void quantize_q4_k(const float* x, BlockQ4_K* blocks, int64_t nb) {
  uint8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ4_K& block = blocks[b];
    quantize_k4_block(x, 15, &block.d, &block.dmin, block.scales, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        block.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* blocks, int64_t nb) {
  uint8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ5_K& block = blocks[b];
    quantize_k4_block(x, 31, &block.d, &block.dmin, block.scales, q);
    std::memset(block.qh, 0, sizeof block.qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        block.qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        block.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// Per 16 values the extreme maps to -32 (as Q4_0 does); the 16 scales are int8 under d.
void quantize_q6_k(const float* x, BlockQ6_K* blocks, int64_t nb) {
  int q[kQK];
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    BlockQ6_K& block = blocks[b];
    float scales[16], max_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      scales[s] = signed_absmax(x + 16 * s, 16) / -32.0f;
      max_scale = std::max(max_scale, std::fabs(scales[s]));
    }
    const float d = store_fp16(max_scale / 127.0f, &block.d);
    for (int s = 0; s < 16; ++s) {
      const int units = scale_units(std::fabs(scales[s]), d, 127);
      block.scales[s] = static_cast<int8_t>(scales[s] < 0 ? -units : units);
      const float step = d * block.scales[s];
      for (int l = 0; l < 16; ++l) q[16 * s + l] = quantize_value(x[16 * s + l], step, -32, 31) + 32;
    }
    for (int half = 0; half < 2; ++half) {
      const int* v = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * half + l] = static_cast<uint8_t>((v[l] & 15) | ((v[l + 64] & 15) << 4));
        block.ql[64 * half + l + 32] = static_cast<uint8_t>((v[l + 32] & 15) | ((v[l + 96] & 15) << 4));
        block.qh[32 * half + l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) |
                                                       ((v[l + 64] >> 4) << 4) | ((v[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / dtype_block_elems(type);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::Q4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::Q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::Q4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::Q5_K: return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
    case DType::Q6_K: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
  }
  fail("quantize_row: unsupported type {}", static_cast<uint32_t>(type));
}

}  // namespace deferkv
