// Q5_K weights x int16 activation: as Q4_K (see matvec_q4_k.cpp) with the fifth bit of
// each value merged in from qh before the scale multiply (at most 31 * 63, still int16),
// a block decoded once for a group of activations.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_q5_k.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"
#include "kernels/scales_k4-inl.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void MatvecQ5K(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
               float* y, int64_t ldy, int64_t rows) {
  const ExactCappedTag<int16_t, 32> d16;  // a sub-block is 32 values
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  const hn::Rebind<uint8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  const auto mask = hn::Set(d16, 15);
  const auto bit4 = hn::Set(d16, 16);
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    const auto x = PackedViews<M>(packed, packed_stride, first, n, kQK);
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const BlockQ5_K& block = reinterpret_cast<const BlockQ5_K*>(row)[b];
      const BlockScalesK4 scales(d16, block.scales);
      DEFERKV_VECTORS(hn::Vec<decltype(d32)>, sum0, M);
      DEFERKV_VECTORS(hn::Vec<decltype(d32)>, sum1, M);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum0[i] = sum1[i] = hn::Zero(d32); });
      for (size_t k = 0; k < 32; k += L) {
        // Chunk c takes bits 2c and 2c+1 of qh; shifting h right by 2 per chunk keeps
        // them at bits 0 and 1.
        auto h = hn::PromoteTo(d16, hn::LoadU(d8, block.qh + k));
        Unroll<4>([&](auto c) DEFERKV_INLINE_LAMBDA {
          const auto q = hn::PromoteTo(d16, hn::LoadU(d8, block.qs + 32 * c + k));
          const auto lo = hn::Mul(hn::Or(hn::And(q, mask), hn::And(hn::ShiftLeft<4>(h), bit4)), scales.Scale(2 * c));
          const auto hi = hn::Mul(hn::Or(hn::ShiftRight<4>(q), hn::And(hn::ShiftLeft<3>(h), bit4)),
                                  scales.Scale(2 * c + 1));
          h = hn::ShiftRight<2>(h);
          Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
            const int16_t* xq = x[i].q + b * kQK + 64 * c + k;
            sum0[i] = hn::ReorderWidenMulAccumulate(d32, lo, hn::LoadU(d16, xq), sum0[i], sum1[i]);
            sum0[i] = hn::ReorderWidenMulAccumulate(d32, hi, hn::LoadU(d16, xq + 32), sum0[i], sum1[i]);
          });
        });
      }
      AddBlockK4(df, sum0, sum1, block.d, block.dmin, scales, x, b, acc);
    };
    MatvecByBlocks<M>(df, base + r0 * stride, stride, n / kQK, y + first * ldy + r0, ldy, count, block_fma);
  });
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ5K);
}  // namespace

void matvec_q5_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ5K)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
