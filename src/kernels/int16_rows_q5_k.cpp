// Q5_K rows as integers for gemm_int16 (int16_rows.h): q = (five-bit value) * (its sub-block's six-bit scale), at most 31 * 63; scale = d, mins = the six-bit mins, min_scale = dmin.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/int16_rows_q5_k.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/int16_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void DecodeQ5K(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  const ExactCappedTag<int16_t, 32> d16;  // a sub-block is 32 values
  const hn::Rebind<uint8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  const auto mask = hn::Set(d16, 15);
  const auto bit4 = hn::Set(d16, 16);
  const int64_t nb = out.n / kQK;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ5_K*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ5_K& block = blocks[b];
      const ScalesK4 s = out.set_k4_scales(r * nb + b, block.d, block.dmin, block.scales);
      const int64_t k0 = b * kQK;
      for (size_t k = 0; k < 32; k += L) {
        // Chunk c (sub-blocks 2c and 2c+1) takes bits 2c and 2c+1 of qh; shifting h right
        // by 2 per chunk keeps them at bits 0 and 1.
        auto h = hn::PromoteTo(d16, hn::LoadU(d8, block.qh + k));
        for (int c = 0; c < 4; ++c) {
          const auto v = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + 32 * c + k));
          const auto lo = hn::Or(hn::And(v, mask), hn::And(hn::ShiftLeft<4>(h), bit4));
          const auto hi = hn::Or(hn::ShiftRight<4>(v), hn::And(hn::ShiftLeft<3>(h), bit4));
          hn::StoreU(hn::Mul(lo, hn::Set(d16, s.sc[2 * c])), d16, out.at(r, k0 + 64 * c + k));
          hn::StoreU(hn::Mul(hi, hn::Set(d16, s.sc[2 * c + 1])), d16, out.at(r, k0 + 64 * c + 32 + k));
          h = hn::ShiftRight<2>(h);
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
HWY_EXPORT(DecodeQ5K);
}  // namespace

void decode_int16_rows_q5_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  HWY_DYNAMIC_DISPATCH(DecodeQ5K)(rows, row_stride, count, out);
}
}  // namespace deferkv
#endif
