// Q4_K and Q5_K weights x the int8 form of the activation (packed_activation.h; chosen by
// KQuantActivation, matvec.h). The values stay bytes (Q5_K's fifth bit merged in from qh) and
// meet the int8 activation in x86's unsigned-by-signed byte multiply-adds; each sub-block's
// int32 partial sums are multiplied by its six-bit scale with an int16 multiply-add, so one
// exact int32 sum per activation covers the block and its float scales are applied once, as
// in matvec_q4_k.cpp and matvec_q5_k.cpp (which widen the values to int16 instead: half the
// multiply-adds per instruction). The mins contribute dmin * sum_j m_j * (the activation's
// 32-value sums). Per target:
//  - x86 (AVX2 and both AVX-512 targets): 256-bit vectors, one sub-block each; vpmaddubsw
//    sums pairs into int16 (|.| <= 2 * 31 * 127, never saturating), then vpmaddwd with the
//    scale in every int16 lane. On Zen 4 the AVX-512 form (a 32-byte chunk in both halves
//    of a 512-bit vector, vpdpbusd then vpdpwssd) decoded the 100M Q4_K model about 12%
//    slower at one thread, and so did a 256-bit vpdpbusd form (bench/README.md, "K-quant
//    decode in 256-bit vectors"); rerun on an Intel AVX-512 CPU before widening it there.
//  - the others (the portable fallback, NEON, SVE): bytes widened to int16, Highway's
//    widening multiply-add, then the scale multiplied in int32.
// A block is decoded once for a group of activations (kernel_helpers-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_k4_int8.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <type_traits>

#include "kernels/k4_values-inl.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"
#include "kernels/scales_k4-inl.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

using D16 = ExactCappedTag<int16_t, 16>;  // at most 256 bits (above); a sub-block is 32 values
using D32 = hn::Repartition<int32_t, D16>;
using DF = hn::Repartition<float, D16>;
using V32 = hn::Vec<D32>;

template <size_t M>
HWY_INLINE std::array<PackedActivationInt8, M> Int8Views(const void* packed, size_t stride, int64_t first,
                                                         int64_t n) {
  std::array<PackedActivationInt8, M> views;
  const auto* base = static_cast<const uint8_t*>(packed) + static_cast<size_t>(first) * stride;
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { views[i] = packed_view_int8(base + i * stride, n); });
  return views;
}

// sum[i] += sum_j sc_j * (sub-block j of the block . the same 32 values of x_i), i < M.
// Block: BlockQ4_K or BlockQ5_K (whose value bit 4 of sub-block j is bit j of qh[l]); sum:
// DEFERKV_VECTORS' M.
template <size_t M, class Block, class Sums>
HWY_INLINE void BlockDots(const Block& block, const BlockScalesK4<D16>& scales,
                          const std::array<PackedActivationInt8, M>& x, int64_t b, Sums& sum) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  Unroll<4>([&](auto c) DEFERKV_INLINE_LAMBDA {
    __m256i lo, hi;
    K4Bytes(block, c, lo, hi);
    const __m256i scale_lo = scales.Scale(2 * c).raw;
    const __m256i scale_hi = scales.Scale(2 * c + 1).raw;
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      const int8_t* xq = x[i].q + b * kQK + 64 * c;
      const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
      const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32));
      const __m256i dot_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo), scale_lo);
      const __m256i dot_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi), scale_hi);
      sum[i] = V32{_mm256_add_epi32(sum[i].raw, _mm256_add_epi32(dot_lo, dot_hi))};
    });
  });
#else
  const D16 d16;
  const D32 d32;
  const hn::Rebind<uint8_t, D16> du8;
  const hn::Rebind<int8_t, D16> di8;
  constexpr size_t L = hn::MaxLanes(d16);
  const auto mask = hn::Set(d16, 15);
  const ScalesK4 s = unpack_scales_k4(block.scales);
  for (int c = 0; c < 4; ++c) {
    DEFERKV_VECTORS(V32, lo0, M);
    DEFERKV_VECTORS(V32, lo1, M);
    DEFERKV_VECTORS(V32, hi0, M);
    DEFERKV_VECTORS(V32, hi1, M);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { lo0[i] = lo1[i] = hi0[i] = hi1[i] = hn::Zero(d32); });
    for (size_t k = 0; k < 32; k += L) {
      const auto q = hn::PromoteTo(d16, hn::LoadU(du8, block.qs + 32 * c + k));
      auto lo = hn::And(q, mask);
      auto hi = hn::ShiftRight<4>(q);
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        const auto h = hn::ShiftRightSame(hn::PromoteTo(d16, hn::LoadU(du8, block.qh + k)), 2 * c);
        lo = hn::Or(lo, hn::And(hn::ShiftLeft<4>(h), hn::Set(d16, 16)));
        hi = hn::Or(hi, hn::And(hn::ShiftLeft<3>(h), hn::Set(d16, 16)));
      }
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const int8_t* xq = x[i].q + b * kQK + 64 * c + k;
        lo0[i] = hn::ReorderWidenMulAccumulate(d32, lo, hn::PromoteTo(d16, hn::LoadU(di8, xq)), lo0[i], lo1[i]);
        hi0[i] = hn::ReorderWidenMulAccumulate(d32, hi, hn::PromoteTo(d16, hn::LoadU(di8, xq + 32)), hi0[i], hi1[i]);
      });
    }
    const auto scale_lo = hn::Set(d32, s.sc[2 * c]);
    const auto scale_hi = hn::Set(d32, s.sc[2 * c + 1]);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      sum[i] = hn::Add(sum[i], hn::Mul(hn::RearrangeToOddPlusEven(lo0[i], lo1[i]), scale_lo));
      sum[i] = hn::Add(sum[i], hn::Mul(hn::RearrangeToOddPlusEven(hi0[i], hi1[i]), scale_hi));
    });
  }
#endif
}

template <class Block>
HWY_INLINE void MatvecK4Int8(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride,
                             int64_t m, float* y, int64_t ldy, int64_t rows) {
  const D16 d16;
  const D32 d32;
  const DF df;
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<kMatvecGroup>(m, rows, [&](auto group, int64_t first, int64_t r0, int64_t count) {
    constexpr size_t M = decltype(group)::value;
    const auto x = Int8Views<M>(packed, packed_stride, first, n);
    const auto block_fma = [&](const uint8_t* row, int64_t b, auto& acc) DEFERKV_INLINE_LAMBDA {
      const Block& block = reinterpret_cast<const Block*>(row)[b];
      const BlockScalesK4 scales(d16, block.scales);
      DEFERKV_VECTORS(V32, sum, M);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum[i] = hn::Zero(d32); });
      BlockDots<M>(block, scales, x, b, sum);
      const float dw = F16ToF32(block.d), dm = F16ToF32(block.dmin);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const float dx = x[i].d[b];
        acc[i] = hn::MulAdd(hn::ConvertTo(df, sum[i]), hn::Set(df, dw * dx), acc[i]);
        scales.AccumulateMins(x[i].sums + b * 8, -dm * dx, acc[i]);
      });
    };
    MatvecByBlocks<M>(df, base + r0 * stride, stride, n / kQK, y + first * ldy + r0, ldy, count, block_fma);
  });
}

void MatvecQ4KInt8(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                   float* y, int64_t ldy, int64_t rows) {
  MatvecK4Int8<BlockQ4_K>(w, stride, n, packed, packed_stride, m, y, ldy, rows);
}

void MatvecQ5KInt8(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                   float* y, int64_t ldy, int64_t rows) {
  MatvecK4Int8<BlockQ5_K>(w, stride, n, packed, packed_stride, m, y, ldy, rows);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ4KInt8);
HWY_EXPORT(MatvecQ5KInt8);
}  // namespace

void matvec_q5_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ5KInt8)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}

void matvec_q4_k_int8(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride,
                      int64_t m, float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ4KInt8)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
