#pragma once
// The form pack_activation gives the input vector x for quantised weights: x is cut in
// blocks (32 values for Q4_0/Q8_0 weights, 256 for K-quants) and x[i] ~= q[i] * d[block]
// with q in [-127, 127] (round to nearest, d = max|x| / 127 of the block). q is kept as
// int16 although it fits int8: every weight row multiplies it, and widening once here
// saves widening it again for each row. K-quant blocks also carry the sum of q over each
// 32 values, which turns the Q4_K/Q5_K per-sub-block mins into one multiply each.
//
// Memory layout (each array starts on a 64-byte boundary from the buffer's start):
//   float d[n / block];  int16_t sums[n / 32] (256-blocks only);  int16_t q[n].
#include <cstddef>
#include <cstdint>

namespace deferkv {

struct PackedQ8View {
  const float* d;
  const int16_t* sums;  // nullptr for 32-blocks
  const int16_t* q;
};

struct PackedQ8Offsets {
  size_t sums;
  size_t q;
  size_t total;
};

inline PackedQ8Offsets packed_q8_offsets(int64_t n, int block) {
  auto round_up = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const auto count = static_cast<size_t>(n);
  PackedQ8Offsets offsets;
  offsets.sums = round_up(count / static_cast<size_t>(block) * sizeof(float));
  offsets.q = offsets.sums + (block == 256 ? round_up(count / 32 * sizeof(int16_t)) : 0);
  offsets.total = offsets.q + round_up(count * sizeof(int16_t));
  return offsets;
}

inline PackedQ8View packed_q8_view(const void* packed, int64_t n, int block) {
  const auto* base = static_cast<const unsigned char*>(packed);
  const PackedQ8Offsets offsets = packed_q8_offsets(n, block);
  return {reinterpret_cast<const float*>(base),
          block == 256 ? reinterpret_cast<const int16_t*>(base + offsets.sums) : nullptr,
          reinterpret_cast<const int16_t*>(base + offsets.q)};
}

}  // namespace deferkv
