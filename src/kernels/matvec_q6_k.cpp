// Q6_K weights x int16 activation (256-blocks). The six-bit values are assembled in int16
// lanes, offset by -32 and multiplied by their int8 scale (at most 32 * 128, still int16)
// so one int32 multiply-add chain covers the whole block; d is applied once per block.
// A block is decoded once for a group of activations (kernel_helpers-inl.h).
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
#if HWY_TARGET != HWY_SCALAR
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
template <class D16>
class BlockScalesQ6 {
 public:
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
  const hn::CappedTag<int16_t, 32> d16;
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
      hn::Vec<decltype(d32)> sum0[M], sum1[M];
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum0[i] = sum1[i] = hn::Zero(d32); });
      for (int half = 0; half < 2; ++half) {
        for (size_t k = 0; k < 32; k += L) {
          const Q6Groups values(d16, block, half, k);
          Unroll<4>([&](auto g) DEFERKV_INLINE_LAMBDA {
            const auto v = hn::Mul(hn::Sub(values.group[g], offset), scales.ForGroup(half, g, k));
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

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecQ6K);
}  // namespace

void matvec_q6_k(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecQ6K)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
