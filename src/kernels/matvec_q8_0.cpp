// Q8_0 weights x int16 activation: per 32-block an int16 multiply-add of the widened
// weights with the packed activation, then one float FMA by d_w * d_x.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_q8_0.cpp"
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

void MatvecQ8_0(const void* w, size_t stride, int64_t n, const void* packed, float* y, int64_t rows) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  static_assert(kQ32 % L == 0);
  const PackedActivation x = packed_view(packed, n, kQ32);
  const auto block_fma = [&](const uint8_t* row, int64_t b, auto acc) DEFERKV_INLINE_LAMBDA {
    const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(row)[b];
    const int16_t* xq = x.q + b * kQ32;
    auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
    for (size_t k = 0; k < kQ32; k += L) {
      const auto q = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + k));
      sum0 = hn::ReorderWidenMulAccumulate(d32, q, hn::LoadU(d16, xq + k), sum0, sum1);
    }
    const float scale = F16ToF32(block.d) * x.d[b];
    return hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(sum0, sum1)), hn::Set(df, scale), acc);
  };
  MatvecByBlocks(df, w, stride, n / kQ32, y, rows, block_fma);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ8_0);
}  // namespace

void matvec_q8_0(const void* w, size_t row_stride, int64_t n, const void* packed, float* y, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ8_0)(w, row_stride, n, packed, y, rows);
}
}  // namespace deferkv
#endif
