// Q4_0 weights x int8 activation: per 32-block the nibbles are widened to int16, offset
// by -8, multiply-added with the packed activation, then one float FMA by d_w * d_x.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_q4_0.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void MatvecQ4_0(const void* w, size_t stride, int64_t n, const void* packed, float* y, int64_t rows) {
  // A block's 16 bytes hold values 0-15 (low nibbles) and 16-31 (high nibbles), so
  // vectors span at most 16 values.
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  const hn::Rebind<uint8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  static_assert(16 % L == 0);
  const auto mask = hn::Set(d16, 15);
  const auto offset = hn::Set(d16, 8);
  const PackedQ8View x = packed_q8_view(packed, n, kQ32);
  MatvecByBlocks(df, w, stride, n / kQ32, y, rows, [&](const uint8_t* row, int64_t b, auto acc) DEFERKV_INLINE_LAMBDA {
    const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(row)[b];
    const int16_t* xq = x.q + b * kQ32;
    auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
    for (size_t k = 0; k < 16; k += L) {
      const auto q = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + k));
      const auto lo = hn::Sub(hn::And(q, mask), offset);
      const auto hi = hn::Sub(hn::ShiftRight<4>(q), offset);
      sum0 = hn::ReorderWidenMulAccumulate(d32, lo, hn::LoadU(d16, xq + k), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hi, hn::LoadU(d16, xq + 16 + k), sum0, sum1);
    }
    const float scale = F16ToF32(block.d) * x.d[b];
    return hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(sum0, sum1)), hn::Set(df, scale), acc);
  });
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ4_0);
}  // namespace

void matvec_q4_0(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ4_0)(w, row_stride, n, packed, y, rows);
}
}  // namespace deferkv
#endif
