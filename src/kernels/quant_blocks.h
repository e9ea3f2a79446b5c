#pragma once
// Byte layouts of the quantised block types, exactly as ggml/GGUF store them, and the
// packing of the six-bit scales that Q4_K and Q5_K share. Every struct is read in place
// from a memory-mapped GGUF file, so sizes and field order must not change.
#include <cstdint>
#include <cstring>

namespace deferkv {

inline constexpr int kQ32 = 32;    // elements per Q4_0 / Q8_0 block
inline constexpr int kQK = 256;    // elements per K-quant super-block

// 32 values: x[j] = ((qs[j] & 15) - 8) * d, x[j + 16] = ((qs[j] >> 4) - 8) * d.
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[16];
};

// 32 values: x[j] = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;  // fp16
  int8_t qs[32];
};

// 256 values in 8 sub-blocks of 32, each with a six-bit scale sc and min m:
// x = d * sc * q - dmin * m with q in [0, 15]. Chunk c (64 values) keeps sub-block 2c
// in the low nibbles of qs[32c .. 32c+31] and sub-block 2c+1 in their high nibbles.
struct BlockQ4_K {
  uint16_t d;     // fp16, scale of the sub-block scales
  uint16_t dmin;  // fp16, scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[128];
};

// As Q4_K with q in [0, 31]: the fifth bit of sub-block 2c element l is bit 2c of qh[l],
// that of sub-block 2c+1 is bit 2c+1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};

// 256 values in two halves of 128; x = d * scales[s] * (q - 32), q six-bit, one int8
// scale per 16 values. In half h, for l in [0, 32) with L = ql + 64h, H = qh + 32h:
//   value 128h + l      : low nibble of L[l]      | bits 0-1 of H[l] << 4
//   value 128h + l + 32 : low nibble of L[l + 32] | bits 2-3 of H[l] << 4
//   value 128h + l + 64 : high nibble of L[l]     | bits 4-5 of H[l] << 4
//   value 128h + l + 96 : high nibble of L[l + 32]| bits 6-7 of H[l] << 4
// so value v (within the block) uses scale v / 16.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 12 scale bytes of Q4_K/Q5_K hold 8 six-bit scales and 8 six-bit mins. Sub-blocks
// 0-3 keep scale and min in the low six bits of bytes 0-3 and 4-7; sub-blocks 4-7 keep
// their low four bits in the nibbles of bytes 8-11 (scale low, min high) and their top
// two bits in the top two bits of bytes 0-3 (scale) and 4-7 (min).
struct ScalesK4 {
  uint8_t sc[8];
  uint8_t m[8];
};

// Decodes the 12 bytes four at a time (as little-endian 32-bit words, bytes in lanes).
inline ScalesK4 unpack_scales_k4(const uint8_t* s) {
  uint32_t low, mid, high;  // bytes 0-3, 4-7, 8-11
  std::memcpy(&low, s, 4);
  std::memcpy(&mid, s + 4, 4);
  std::memcpy(&high, s + 8, 4);
  const uint32_t sc_0_3 = low & 0x3f3f3f3fu;
  const uint32_t m_0_3 = mid & 0x3f3f3f3fu;
  // (word >> 2) & 0x30 moves each byte's bits 6-7 to its bits 4-5.
  const uint32_t sc_4_7 = (high & 0x0f0f0f0fu) | ((low >> 2) & 0x30303030u);
  const uint32_t m_4_7 = ((high >> 4) & 0x0f0f0f0fu) | ((mid >> 2) & 0x30303030u);
  ScalesK4 out;
  std::memcpy(out.sc, &sc_0_3, 4);
  std::memcpy(out.sc + 4, &sc_4_7, 4);
  std::memcpy(out.m, &m_0_3, 4);
  std::memcpy(out.m + 4, &m_4_7, 4);
  return out;
}

// Inverse of unpack_scales_k4; every sc and m must be < 64.
inline void pack_scales_k4(const ScalesK4& in, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((in.sc[j] & 63) | ((in.sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((in.m[j] & 63) | ((in.m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((in.sc[j + 4] & 15) | ((in.m[j + 4] & 15) << 4));
  }
}

}  // namespace deferkv
