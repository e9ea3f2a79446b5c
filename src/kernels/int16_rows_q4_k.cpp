// Q4_K rows as integers for gemm_int16 (int16_rows.h): q = (nibble) * (its sub-block's
// six-bit scale), at most 15 * 63; scale = d, mins = the six-bit mins, min_scale = dmin.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/int16_rows_q4_k.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/int16_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void DecodeQ4K(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  const ExactCappedTag<int16_t, 32> d16;  // a sub-block is 32 values
  const hn::Rebind<uint8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  const auto mask = hn::Set(d16, 15);
  const int64_t nb = out.n / kQK;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_K& block = blocks[b];
      const ScalesK4 s = out.set_k4_scales(r * nb + b, block.d, block.dmin, block.scales);
      const int64_t k0 = b * kQK;
      // Chunk c: sub-blocks 2c (low nibbles of qs[32c..]) and 2c+1 (their high nibbles).
      for (int c = 0; c < 4; ++c) {
        const auto lo_scale = hn::Set(d16, s.sc[2 * c]);
        const auto hi_scale = hn::Set(d16, s.sc[2 * c + 1]);
        for (size_t k = 0; k < 32; k += L) {
          const auto v = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + 32 * c + k));
          hn::StoreU(hn::Mul(hn::And(v, mask), lo_scale), d16, out.at(r, k0 + 64 * c + k));
          hn::StoreU(hn::Mul(hn::ShiftRight<4>(v), hi_scale), d16, out.at(r, k0 + 64 * c + 32 + k));
        }
      }
    }
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(DecodeQ4K);
}  // namespace

void decode_int16_rows_q4_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  HWY_DYNAMIC_DISPATCH(DecodeQ4K)(rows, row_stride, count, out);
}
}  // namespace deferkv
#endif
