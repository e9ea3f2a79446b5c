// Q4_0 weights x int16 activation: per 32-block the nibbles are widened to int16, offset
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

// The int32 partial sums of one block's dot product with its 32 packed activations. A
// block's 16 bytes hold values 0-15 (low nibbles) and 16-31 (high nibbles).
template <class D16>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, D16>> BlockDot(D16 d16, const uint8_t* qs, const int16_t* xq) {
  const hn::Repartition<int32_t, D16> d32;
  constexpr size_t L = hn::MaxLanes(d16);
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  if constexpr (L == 32) {
    // Widen the 16 bytes once into a half vector, then join low and high nibbles into
    // one full vector of the block's 32 values. (Combine is found by argument-dependent
    // lookup: the one-lane target has none, and never instantiates this branch.)
    const hn::Half<D16> dh;
    const auto q = hn::PromoteTo(dh, hn::LoadU(hn::Rebind<uint8_t, decltype(dh)>(), qs));
    const auto values = Combine(d16, hn::ShiftRight<4>(q), hn::And(q, hn::Set(dh, 15)));
    const auto centred = hn::Sub(values, hn::Set(d16, 8));
    sum0 = hn::ReorderWidenMulAccumulate(d32, centred, hn::LoadU(d16, xq), sum0, sum1);
  } else {
    static_assert(16 % L == 0);
    const hn::Rebind<uint8_t, D16> d8;
    for (size_t k = 0; k < 16; k += L) {
      const auto q = hn::PromoteTo(d16, hn::LoadU(d8, qs + k));
      const auto lo = hn::Sub(hn::And(q, hn::Set(d16, 15)), hn::Set(d16, 8));
      const auto hi = hn::Sub(hn::ShiftRight<4>(q), hn::Set(d16, 8));
      sum0 = hn::ReorderWidenMulAccumulate(d32, lo, hn::LoadU(d16, xq + k), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hi, hn::LoadU(d16, xq + 16 + k), sum0, sum1);
    }
  }
  return hn::RearrangeToOddPlusEven(sum0, sum1);
}

void MatvecQ4_0(const void* w, size_t stride, int64_t n, const void* packed, float* y, int64_t rows) {
  const hn::CappedTag<int16_t, 32> d16;
  const hn::Repartition<float, decltype(d16)> df;
  const PackedActivation x = packed_view(packed, n, kQ32);
  const auto block_fma = [&](const uint8_t* row, int64_t b, auto acc) DEFERKV_INLINE_LAMBDA {
    const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(row)[b];
    const float scale = F16ToF32(block.d) * x.d[b];
    return hn::MulAdd(hn::ConvertTo(df, BlockDot(d16, block.qs, x.q + b * kQ32)), hn::Set(df, scale), acc);
  };
  MatvecByBlocks(df, w, stride, n / kQ32, y, rows, block_fma);
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
