// Q8_0 weights x int16 activation: per 32-block an int16 multiply-add of the widened
// weights with the packed activation, then one float FMA by d_w * d_x. A block is
// widened once for a group of activations (kernel_helpers-inl.h).
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

void MatvecQ8_0(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  const ExactCappedTag<int16_t, kQ32> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  static_assert(kQ32 % L == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    const auto x = PackedViews<M>(packed, packed_stride, first, n, kQ32);
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(row)[b];
      DEFERKV_VECTORS(hn::Vec<decltype(d16)>, q, kQ32 / L);
      Unroll<kQ32 / L>([&](auto k) DEFERKV_INLINE_LAMBDA { q[k] = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + k * L)); });
      const float dw = F16ToF32(block.d);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const int16_t* xq = x[i].q + b * kQ32;
        auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
        Unroll<kQ32 / L>([&](auto k) DEFERKV_INLINE_LAMBDA {
          sum0 = hn::ReorderWidenMulAccumulate(d32, q[k], hn::LoadU(d16, xq + k * L), sum0, sum1);
        });
        const float scale = dw * x[i].d[b];
        acc[i] = hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(sum0, sum1)), hn::Set(df, scale), acc[i]);
      });
    };
    MatvecByBlocks<M>(df, base + r0 * stride, stride, n / kQ32, y + first * ldy + r0, ldy, count, block_fma);
  });
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ8_0);
}  // namespace

void matvec_q8_0(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ8_0)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
