// Q4_0 weights x int16 activation: per 32-block the nibbles are widened to int16, offset
// by -8, multiply-added with the packed activation, then one float FMA by d_w * d_x.
// A block is widened once for a group of activations (kernel_helpers-inl.h). Vectors of
// 256 bits at most: on Zen 4 the AVX-512 build of the same code decoded the 100M Q4_0
// model at 193-195 t/s (one thread), capped at AVX2 at 228-236 (bench/README.md). An int8
// form of the activation (vpmaddubsw on |w| and x signed by w) measured 213 there, no
// better than this one, so Q4_0 keeps the int16 activation.
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

// A block's 32 values (16 bytes: values 0-15 in the low nibbles, 16-31 in the high ones)
// widened to int16 and centred (-8), into v[0 .. kQ4_0Vectors) (DEFERKV_VECTORS).
template <class D16>
constexpr size_t kQ4_0Vectors = 32 / hn::MaxLanes(D16());

template <class D16, class Values>
HWY_INLINE void DecodeQ4_0(D16 d16, const uint8_t* qs, Values& v) {
  constexpr size_t L = hn::MaxLanes(d16);
  if constexpr (L == 32) {
    // Widen the 16 bytes once into a half vector, then join low and high nibbles into
    // one full vector of the block's 32 values. (Combine is found by argument-dependent
    // lookup: the one-lane target has none, and never instantiates this branch.)
    const hn::Half<D16> dh;
    const auto q = hn::PromoteTo(dh, hn::LoadU(hn::Rebind<uint8_t, decltype(dh)>(), qs));
    v[0] = hn::Sub(Combine(d16, hn::ShiftRight<4>(q), hn::And(q, hn::Set(dh, 15))), hn::Set(d16, 8));
  } else {
    static_assert(16 % L == 0);
    const hn::Rebind<uint8_t, D16> d8;
    Unroll<16 / L>([&](auto k) DEFERKV_INLINE_LAMBDA {
      const auto q = hn::PromoteTo(d16, hn::LoadU(d8, qs + k * L));
      v[k] = hn::Sub(hn::And(q, hn::Set(d16, 15)), hn::Set(d16, 8));
      v[16 / L + k] = hn::Sub(hn::ShiftRight<4>(q), hn::Set(d16, 8));
    });
  }
}

// The int32 partial sums of the block's dot product with its 32 packed activations.
template <class D16, class Values>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, D16>> DotQ4_0(D16 d16, const Values& v, const int16_t* xq) {
  const hn::Repartition<int32_t, D16> d32;
  constexpr size_t L = hn::MaxLanes(d16);
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  Unroll<kQ4_0Vectors<D16>>([&](auto k) DEFERKV_INLINE_LAMBDA {
    sum0 = hn::ReorderWidenMulAccumulate(d32, v[k], hn::LoadU(d16, xq + k * L), sum0, sum1);
  });
  return hn::RearrangeToOddPlusEven(sum0, sum1);
}

void MatvecQ4_0(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  const ExactCappedTag<int16_t, 16> d16;  // 256 bits at most (above)
  const hn::Repartition<float, decltype(d16)> df;
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    const auto x = PackedViews<M>(packed, packed_stride, first, n, kQ32);
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(row)[b];
      DEFERKV_VECTORS(hn::Vec<decltype(d16)>, values, kQ4_0Vectors<decltype(d16)>);
      DecodeQ4_0(d16, block.qs, values);
      const float dw = F16ToF32(block.d);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const float scale = dw * x[i].d[b];
        acc[i] = hn::MulAdd(hn::ConvertTo(df, DotQ4_0(d16, values, x[i].q + b * kQ32)), hn::Set(df, scale), acc[i]);
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
HWY_EXPORT(MatvecQ4_0);
}  // namespace

void matvec_q4_0(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ4_0)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
