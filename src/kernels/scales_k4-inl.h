// The six-bit scales and mins of a Q4_K/Q5_K block (layout in quant_blocks.h), decoded
// for the matvec kernels: Scale(j) is a vector of sub-block j's scale in int16 lanes, and
// AccumulateMins adds the block's min term; AddBlockK4 ends a block for a group of
// activations. Included per target (toggle guard).
#if defined(DEFERKV_KERNELS_SCALES_K4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DEFERKV_KERNELS_SCALES_K4_INL_H_
#undef DEFERKV_KERNELS_SCALES_K4_INL_H_
#else
#define DEFERKV_KERNELS_SCALES_K4_INL_H_
#endif

#include <array>
#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE

// Decodes all sixteen values with a handful of vector instructions per block, leaving
// them in every 128-bit lane; each Scale(j) is then a single byte shuffle instead of a
// scalar extraction plus a broadcast.
template <class D16>
class BlockScalesK4 {
 public:
  // Reads 16 bytes from `scales` (the 12 scale bytes and 4 bytes of what follows them).
  HWY_INLINE BlockScalesK4(D16 d16, const uint8_t* scales) {
    const hn::Repartition<uint8_t, D16> du8;
    const hn::Repartition<uint32_t, D16> du32;
    // The 12 bytes are three 32-bit words low, mid, high (unpack_scales_k4 spells out
    // the same arithmetic). Lanes of 32 bits are arranged so that one pass of
    // shift/mask/or yields the words sc[0..3], sc[4..7], m[0..3], m[4..7]:
    //   ((A >> shift) & mask_a) | ((B >> 2) & mask_b)
    // with A = [low, high, mid, high], B = [low, low, mid, mid].
    alignas(16) static constexpr uint8_t kPickA[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    alignas(16) static constexpr uint8_t kPickB[16] = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7};
    alignas(16) static constexpr uint32_t kShiftA[4] = {0, 0, 0, 4};
    alignas(16) static constexpr uint32_t kMaskA[4] = {0x3f3f3f3fu, 0x0f0f0f0fu, 0x3f3f3f3fu, 0x0f0f0f0fu};
    alignas(16) static constexpr uint32_t kMaskB[4] = {0, 0x30303030u, 0, 0x30303030u};
    const auto raw = hn::LoadDup128(du8, scales);
    const auto a = hn::BitCast(du32, hn::TableLookupBytes(raw, hn::LoadDup128(du8, kPickA)));
    const auto b = hn::BitCast(du32, hn::TableLookupBytes(raw, hn::LoadDup128(du8, kPickB)));
    const auto from_a = hn::And(hn::Shr(a, hn::LoadDup128(du32, kShiftA)), hn::LoadDup128(du32, kMaskA));
    const auto from_b = hn::And(hn::ShiftRight<2>(b), hn::LoadDup128(du32, kMaskB));
    const auto words = hn::Or(from_a, from_b);
    bytes_ = hn::BitCast(du8, words);  // every 128-bit block: sc[0..7], m[0..7]
  }

  // All lanes sc[j]: a byte lookup with the high byte of each int16 lane zeroed.
  HWY_INLINE hn::Vec<D16> Scale(int j) const {
    const hn::RebindToUnsigned<D16> du16;
    const hn::Repartition<uint8_t, D16> du8;
    const auto index = hn::BitCast(du8, hn::Set(du16, static_cast<uint16_t>(0x8000 | j)));
    return hn::BitCast(D16(), hn::TableLookupBytesOr0(bytes_, index));
  }

  // acc += scale * sum_j m[j] * xsum[j] (xsum: the activation's 8 sub-block sums).
  template <class VF>
  HWY_INLINE void AccumulateMins(const int16_t* xsum, float scale, VF& acc) const {
    const D16 d16;
    const hn::RebindToUnsigned<D16> du16;
    const hn::Repartition<uint8_t, D16> du8;
    const hn::Repartition<int32_t, D16> d32;
    const hn::Repartition<float, D16> df;
    alignas(16) static constexpr uint16_t kPickMins[8] = {0x8008, 0x8009, 0x800a, 0x800b,
                                                          0x800c, 0x800d, 0x800e, 0x800f};
    const auto pick_mins = hn::BitCast(du8, hn::LoadDup128(du16, kPickMins));
    const auto mins = hn::BitCast(d16, hn::TableLookupBytesOr0(bytes_, pick_mins));
    // Only the first block's lanes count; the others would add the same sum again.
    const auto sums = hn::IfThenElseZero(hn::FirstN(d16, 8), hn::LoadDup128(d16, xsum));
    auto sum1 = hn::Zero(d32);
    const auto dot = hn::ReorderWidenMulAccumulate(d32, mins, sums, hn::Zero(d32), sum1);
    acc = hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(dot, sum1)), hn::Set(df, scale), acc);
  }

 private:
  hn::Vec<hn::Repartition<uint8_t, D16>> bytes_;
};

#else  // HWY_SCALAR, one lane, and SVE, whose vectors can be no class members: scalar code
       // decodes the values, each Scale(j) a broadcast of one.

template <class D16>
class BlockScalesK4 {
 public:
  HWY_INLINE BlockScalesK4(D16, const uint8_t* scales) : s_(unpack_scales_k4(scales)) {}

  HWY_INLINE hn::Vec<D16> Scale(int j) const { return hn::Set(D16(), s_.sc[j]); }

  // Into acc's first lane (the caller sums its lanes).
  template <class VF>
  HWY_INLINE void AccumulateMins(const int16_t* xsum, float scale, VF& acc) const {
    const hn::Repartition<float, D16> df;
    int32_t dot = 0;
    for (int j = 0; j < 8; ++j) dot += s_.m[j] * xsum[j];
    acc = hn::Add(acc, hn::IfThenElseZero(hn::FirstN(df, 1), hn::Set(df, scale * static_cast<float>(dot))));
  }

 private:
  ScalesK4 s_;
};

#endif

// Ends a Q4_K/Q5_K block for M activations: acc[i] += d * d_x * (the int32 sums sum0[i],
// sum1[i] as ReorderWidenMulAccumulate left them) - dmin * d_x * sum_j m_j * xsum_j.
// (sum0, sum1, acc: DEFERKV_VECTORS' M.)
template <size_t M, class D16, class DF, class Sums, class Acc>
HWY_INLINE void AddBlockK4(DF df, const Sums& sum0, const Sums& sum1, uint16_t d, uint16_t dmin,
                           const BlockScalesK4<D16>& scales, const std::array<PackedActivation, M>& x, int64_t b,
                           Acc& acc) {
  const float dw = F16ToF32(d), dm = F16ToF32(dmin);
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
    const float dx = x[i].d[b];
    acc[i] = hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(sum0[i], sum1[i])), hn::Set(df, dw * dx), acc[i]);
    scales.AccumulateMins(x[i].sums + b * 8, -dm * dx, acc[i]);
  });
}

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
