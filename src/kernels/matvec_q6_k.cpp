// Q6_K weights x int16 activation (256-blocks). The six-bit values are assembled in int16
// lanes, offset by -32 and multiplied by their int8 scale (at most 32 * 128, still int16)
// so one int32 multiply-add chain covers the whole block; d is applied once per block.
// A block is decoded once for a group of activations (kernel_helpers-inl.h).
//
// MatvecQ6KInt8 takes the int8 form of the activation instead (packed_activation.h): the
// six-bit values stay bytes in [0, 63] and meet the int8 activation in x86's byte
// multiply-adds, the int32 partial sums are multiplied by the scales with an int16
// multiply-add, and the offset comes off per block as 32 * sum_s scale_s * (the
// activation's 16-value sum s). On x86 (AVX2 and AVX-512): vpmaddubsw (|.| <= 2 * 63 * 127)
// then vpmaddwd in 256-bit vectors, as matvec_k4_int8.cpp and for the same reason (the
// AVX-512 form was slower on Zen 4); the other targets widen to int16 as MatvecQ6K does
// (offset included).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_q6_k.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <array>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/q6_k_values-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

// The block's sixteen int8 scales as int16 lanes matching the values of one 32-value
// group: values [k, k + lanes) of group g of half h use scale 8h + 2g + (k + lane) / 16.
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
template <class D16>
class BlockScalesQ6 {
 public:
  HWY_INLINE BlockScalesQ6(D16, const int8_t* scales)
      : bytes_(hn::LoadDup128(hn::Repartition<uint8_t, D16>(), reinterpret_cast<const uint8_t*>(scales))) {}

  // A byte lookup puts the scale in both bytes of each int16 lane; shifting right by 8
  // (arithmetic) then leaves it sign-extended.
  HWY_INLINE hn::Vec<D16> ForGroup(int half, int g, size_t k) const {
    const hn::Repartition<uint8_t, D16> du8;
    const auto index = hn::LoadU(du8, kIndex[4 * half + g].data() + 2 * k);
    return hn::ShiftRight<8>(hn::BitCast(D16(), hn::TableLookupBytes(bytes_, index)));
  }

 private:
  // kIndex[4h + g][2l], kIndex[4h + g][2l + 1]: the scale of value l of group g of half h.
  static constexpr std::array<std::array<uint8_t, 64>, 8> kIndex = [] {
    std::array<std::array<uint8_t, 64>, 8> index{};
    for (int group = 0; group < 8; ++group) {
      for (int l = 0; l < 32; ++l) {
        const auto scale = static_cast<uint8_t>(8 * (group / 4) + 2 * (group % 4) + l / 16);
        index[group][2 * l] = index[group][2 * l + 1] = scale;
      }
    }
    return index;
  }();

  hn::Vec<hn::Repartition<uint8_t, D16>> bytes_;
};
#else
// HWY_SCALAR, and SVE, whose vectors can be no class members: a broadcast of the one scale
// of the lanes (vectors of at most 16).
template <class D16>
class BlockScalesQ6 {
 public:
  static_assert(hn::MaxLanes(D16()) <= 16, "a vector of values must not span two scales");
  HWY_INLINE BlockScalesQ6(D16, const int8_t* scales) : scales_(scales) {}
  HWY_INLINE hn::Vec<D16> ForGroup(int half, int g, size_t k) const {
    return hn::Set(D16(), scales_[8 * half + 2 * g + static_cast<int>(k / 16)]);
  }

 private:
  const int8_t* scales_;
};
#endif

void MatvecQ6K(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
               float* y, int64_t ldy, int64_t rows) {
  const ExactCappedTag<int16_t, 32> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  constexpr size_t L = hn::MaxLanes(d16);
  const auto offset = hn::Set(d16, 32);
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    const auto x = PackedViews<M>(packed, packed_stride, first, n, kQK);
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const BlockQ6_K& block = reinterpret_cast<const BlockQ6_K*>(row)[b];
      const BlockScalesQ6 scales(d16, block.scales);
      DEFERKV_VECTORS(hn::Vec<decltype(d32)>, sum0, M);
      DEFERKV_VECTORS(hn::Vec<decltype(d32)>, sum1, M);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum0[i] = sum1[i] = hn::Zero(d32); });
      for (int half = 0; half < 2; ++half) {
        for (size_t k = 0; k < 32; k += L) {
          const Q6Groups values(d16, block, half, k);
          Unroll<4>([&](auto g) DEFERKV_INLINE_LAMBDA {
            const auto v = hn::Mul(hn::Sub(values.Group(g), offset), scales.ForGroup(half, g, k));
            Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
              const int16_t* xq = x[i].q + b * kQK + 128 * half + 32 * g + k;
              sum0[i] = hn::ReorderWidenMulAccumulate(d32, v, hn::LoadU(d16, xq), sum0[i], sum1[i]);
            });
          });
        }
      }
      const float dw = F16ToF32(block.d);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        acc[i] = hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(sum0[i], sum1[i])),
                            hn::Set(df, dw * x[i].d[b]), acc[i]);
      });
    };
    MatvecByBlocks<M>(df, base + r0 * stride, stride, n / kQK, y + first * ldy + r0, ldy, count, block_fma);
  });
}

using D16 = ExactCappedTag<int16_t, 16>;  // at most 256 bits (above)
using V32 = hn::Vec<hn::Repartition<int32_t, D16>>;

// sum[i] += the block's dot with x_i in integers (before d and x_i's d), i < M (sum:
// DEFERKV_VECTORS' M).
template <size_t M, class Sums>
HWY_INLINE void BlockDotsQ6Int8(const BlockQ6_K& block, const std::array<PackedActivationInt8, M>& x, int64_t b,
                                Sums& sum) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  // The 16 scales widened once; each group's pair (scale s in the low 128 bits, s + 1 in the
  // high ones) is then one byte shuffle of the half's eight, instead of two broadcasts and an
  // insert per group (Zen 4, 100M Q6_K tg128 at one thread: 164-180 -> see bench/README.md).
  const __m256i scales_wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  Unroll<2>([&](auto half) DEFERKV_INLINE_LAMBDA {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half));
    const __m256i half_scales = _mm256_permute2x128_si256(scales_wide, scales_wide, half == 0 ? 0x00 : 0x11);
    // Group g: values 128 * half + 32 * g onwards (Q6Groups' arrangement).
    Unroll<4>([&](auto g) DEFERKV_INLINE_LAMBDA {
      const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.ql + 64 * half + 32 * (g % 2)));
      const __m256i w = Q6GroupBytes(ql, qh, g);
      // Bytes of int16 lane 2g (low 128 bits) and 2g + 1 (high) of half_scales, repeated.
      const auto lo = static_cast<char>(4 * g), hi = static_cast<char>(4 * g + 2);
      const __m256i pick = _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                            lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi,
                                            hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1);
      const __m256i scale = _mm256_shuffle_epi8(half_scales, pick);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].q + b * kQK + 128 * half + 32 * g));
        sum[i] = V32{_mm256_add_epi32(sum[i].raw, _mm256_madd_epi16(_mm256_maddubs_epi16(w, xv), scale))};
      });
    });
  });
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
    const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].sums16 + b * 16));
    sum[i] = V32{_mm256_sub_epi32(sum[i].raw, _mm256_slli_epi32(_mm256_madd_epi16(scales_wide, sums16), 5))};
  });
#else
  const D16 d16;
  const hn::Repartition<int32_t, D16> d32;
  const hn::Rebind<int8_t, D16> di8;
  constexpr size_t L = hn::MaxLanes(d16);
  static_assert(L <= 16, "a vector of values must not span two scales");
  const auto offset = hn::Set(d16, 32);
  const BlockScalesQ6 scales(d16, block.scales);
  DEFERKV_VECTORS(V32, sum1, M);
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum1[i] = hn::Zero(d32); });
  for (int half = 0; half < 2; ++half) {
    for (size_t k = 0; k < 32; k += L) {
      const Q6Groups values(d16, block, half, k);
      Unroll<4>([&](auto g) DEFERKV_INLINE_LAMBDA {
        const auto v = hn::Mul(hn::Sub(values.Group(g), offset), scales.ForGroup(half, g, k));
        Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
          const int8_t* xq = x[i].q + b * kQK + 128 * half + 32 * g + k;
          sum[i] = hn::ReorderWidenMulAccumulate(d32, v, hn::PromoteTo(d16, hn::LoadU(di8, xq)), sum[i], sum1[i]);
        });
      });
    }
  }
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum[i] = hn::RearrangeToOddPlusEven(sum[i], sum1[i]); });
#endif
}

void MatvecQ6KInt8(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                   float* y, int64_t ldy, int64_t rows) {
  const hn::Repartition<int32_t, D16> d32;
  const hn::Repartition<float, D16> df;
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    std::array<PackedActivationInt8, M> x;
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      x[i] = packed_view_int8(static_cast<const uint8_t*>(packed) + static_cast<size_t>(first + i) * packed_stride, n);
    });
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const BlockQ6_K& block = reinterpret_cast<const BlockQ6_K*>(row)[b];
      DEFERKV_VECTORS(V32, sum, M);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum[i] = hn::Zero(d32); });
      BlockDotsQ6Int8<M>(block, x, b, sum);
      const float dw = F16ToF32(block.d);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        acc[i] = hn::MulAdd(hn::ConvertTo(df, sum[i]), hn::Set(df, dw * x[i].d[b]), acc[i]);
      });
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
HWY_EXPORT(MatvecQ6K);
HWY_EXPORT(MatvecQ6KInt8);
}  // namespace

void matvec_q6_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ6KInt8)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}

void matvec_q6_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ6K)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
