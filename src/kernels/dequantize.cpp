// dequantize_row: block layouts (quant_blocks.h) back to float32. Plain scalar loops
// over small fixed-size blocks (the compiler vectorises the inner ones); fp16, bf16,
// q8_0 and q4_0 rows go through the SIMD conversions of float_rows.h.
#include <cstring>

#include "deferkv/error.h"
#include "kernels/float_rows.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace deferkv {
namespace {

void dequantize_q4_k(const BlockQ4_K* blocks, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_K& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    const ScalesK4 s = unpack_scales_k4(block.scales);
    for (int c = 0; c < 4; ++c, y += 64) {
      const uint8_t* q = block.qs + 32 * c;
      const float d_lo = d * s.sc[2 * c], m_lo = dmin * s.m[2 * c];
      const float d_hi = d * s.sc[2 * c + 1], m_hi = dmin * s.m[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        y[l] = d_lo * static_cast<float>(q[l] & 15) - m_lo;
        y[l + 32] = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* blocks, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ5_K& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    const ScalesK4 s = unpack_scales_k4(block.scales);
    for (int c = 0; c < 4; ++c, y += 64) {
      const uint8_t* q = block.qs + 32 * c;
      const float d_lo = d * s.sc[2 * c], m_lo = dmin * s.m[2 * c];
      const float d_hi = d * s.sc[2 * c + 1], m_hi = dmin * s.m[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        const int h_lo = (block.qh[l] >> (2 * c)) & 1;
        const int h_hi = (block.qh[l] >> (2 * c + 1)) & 1;
        y[l] = d_lo * static_cast<float>((q[l] & 15) | (h_lo << 4)) - m_lo;
        y[l + 32] = d_hi * static_cast<float>((q[l] >> 4) | (h_hi << 4)) - m_hi;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* blocks, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    for (int half = 0; half < 2; ++half, y += 128) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      const int8_t* sc = block.scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int s = l / 16;
        y[l] = d * static_cast<float>(sc[s] * q0);
        y[l + 32] = d * static_cast<float>(sc[s + 2] * q1);
        y[l + 64] = d * static_cast<float>(sc[s + 4] * q2);
        y[l + 96] = d * static_cast<float>(sc[s + 6] * q3);
      }
    }
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / dtype_block_elems(type);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: return fp16_row_to_fp32(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16: return bf16_row_to_fp32(static_cast<const uint16_t*>(src), dst, n);
    case DType::Q4_0: return q4_0_row_to_fp32(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q8_0: return q8_0_row_to_fp32(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::Q4_K: return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::Q5_K: return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::Q6_K: return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
  }
  fail("dequantize_row: unsupported type {}", static_cast<uint32_t>(type));
}

}  // namespace deferkv
