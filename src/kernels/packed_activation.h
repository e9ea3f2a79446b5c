#pragma once
// The form pack_activation gives the input vector x for quantised weights: x is cut in
// blocks (32 values for Q4_0/Q8_0 weights, 256 for K-quants) and x[i] ~= q[i] * d[block]
// with integer q in [-qmax, qmax] (round to nearest, d = max|x| / qmax of the block).
//
// q is int16: the kernels multiply int16 weights with it (vpmaddwd), so an int8 range
// would buy no speed there and cost precision (int8 activations, as llama.cpp uses, cost up
// to ~5e-4 of sum |w_i x_i| per dot product). The K-quant kernels that keep the weights in
// bytes take the int8 form below instead (KQuantActivation, matvec.h). qmax is as large
// as the int32 sums allow:
//  - 32-blocks: 32767. A block's dot is at most 32 * 128 * 32767 < 2^31.
//  - 256-blocks: 1023. The 32-value sums below must fit int16 (32 * 1023 < 2^15), and
//    a block's dot with the int16 weight products is at most 256 * 4096 * 1023 < 2^31
//    (Q6_K's |q - 32| * |scale| <= 32 * 128 is the largest; Q5_K's is 31 * 63).
// K-quant blocks also carry the sum of q over each 32 values, which turns the Q4_K/Q5_K
// per-sub-block mins into one multiply each.
//
// Memory layout (each array starts on a 64-byte boundary from the buffer's start):
//   float d[n / block];  int16_t sums[n / 32] (256-blocks only);  int16_t q[n].
#include <cstddef>
#include <cstdint>

namespace deferkv {

inline constexpr int kPackedMax32 = 32767;
inline constexpr int kPackedMax256 = 1023;

// Pointers into a packed buffer (packed_view).
struct PackedActivation {
  const float* d;
  const int16_t* sums;  // nullptr for 32-blocks
  const int16_t* q;
};

// Byte offsets of the arrays in a packed buffer, and its size.
struct PackedLayout {
  size_t sums;
  size_t q;
  size_t total;
};

inline PackedLayout packed_layout(int64_t n, int block) {
  auto round_up = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const auto count = static_cast<size_t>(n);
  PackedLayout offsets;
  offsets.sums = round_up(count / static_cast<size_t>(block) * sizeof(float));
  offsets.q = offsets.sums + (block == 256 ? round_up(count / 32 * sizeof(int16_t)) : 0);
  offsets.total = offsets.q + round_up(count * sizeof(int16_t));
  return offsets;
}

inline PackedActivation packed_view(const void* packed, int64_t n, int block) {
  const auto* base = static_cast<const unsigned char*>(packed);
  const PackedLayout offsets = packed_layout(n, block);
  return {reinterpret_cast<const float*>(base),
          block == 256 ? reinterpret_cast<const int16_t*>(base + offsets.sums) : nullptr,
          reinterpret_cast<const int16_t*>(base + offsets.q)};
}

// The int8 form for weights whose kernels multiply unsigned weight bytes by signed
// activation bytes (x86's maddubs, VNNI's vpdpbusd: twice the multiply-adds per
// instruction of the int16 form): q in [-127, 127], d = max|x| / 127 per block, the
// 32-value sums as above (Q4_K's mins) and the 16-value sums (Q6_K's values are stored
// as q + 32 >= 0 with a scale per 16, so each scale takes 32 times its 16 values' sum
// back off). The sums fit int16 (32 * 127). Blocks of 256 for the K-quants (a block's dot
// is at most 256 * 63 * 127 * 128 < 2^31, Q6_K's largest: value, activation, scale); of
// 32 for gemm_int16's Q4_0 tokens, whose weights have a scale per 32 values.
// Memory layout (64-byte aligned arrays):
//   float d[n / block]; int16_t sums[n / 32]; int16_t sums16[n / 16]; int8_t q[n].
inline constexpr int kPackedMaxInt8 = 127;

struct PackedActivationInt8 {
  const float* d;
  const int16_t* sums;
  const int16_t* sums16;
  const int8_t* q;
};

struct PackedLayoutInt8 {
  size_t sums;
  size_t sums16;
  size_t q;
  size_t total;
};

inline PackedLayoutInt8 packed_layout_int8(int64_t n, int block = 256) {
  auto round_up = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const auto count = static_cast<size_t>(n);
  PackedLayoutInt8 offsets;
  offsets.sums = round_up(count / static_cast<size_t>(block) * sizeof(float));
  offsets.sums16 = offsets.sums + round_up(count / 32 * sizeof(int16_t));
  offsets.q = offsets.sums16 + round_up(count / 16 * sizeof(int16_t));
  offsets.total = offsets.q + round_up(count);
  return offsets;
}

inline PackedActivationInt8 packed_view_int8(const void* packed, int64_t n, int block = 256) {
  const auto* base = static_cast<const unsigned char*>(packed);
  const PackedLayoutInt8 offsets = packed_layout_int8(n, block);
  return {reinterpret_cast<const float*>(base), reinterpret_cast<const int16_t*>(base + offsets.sums),
          reinterpret_cast<const int16_t*>(base + offsets.sums16), reinterpret_cast<const int8_t*>(base + offsets.q)};
}

}  // namespace deferkv
