// Q6_K rows as integers for gemm_int16 (int16_rows.h): q = (six-bit value - 32) * (its 16 values' int8 scale), at most 32 * 128 in magnitude; scale = d.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/int16_rows_q6_k.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/int16_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/q6_k_values-inl.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void DecodeQ6K(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  const ExactCappedTag<int16_t, 16> d16;  // 16 values share a scale
  constexpr size_t L = hn::MaxLanes(d16);
  const auto offset = hn::Set(d16, 32);
  const int64_t nb = out.n / kQK;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ6_K*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K& block = blocks[b];
      out.scale[r * nb + b] = F16ToF32(block.d);
      const int64_t k0 = b * kQK;
      for (int half = 0; half < 2; ++half) {
        for (size_t k = 0; k < 32; k += L) {
          const Q6Groups values(d16, block, half, k);
          for (int g = 0; g < 4; ++g) {
            // Lanes k .. k + L - 1 of the group lie within one 16-value run of a scale.
            const auto scale = hn::Set(d16, block.scales[8 * half + 2 * g + static_cast<int>(k / 16)]);
            hn::StoreU(hn::Mul(hn::Sub(values.Group(g), offset), scale), d16, out.at(r, k0 + 128 * half + 32 * g + k));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(DecodeQ6K);
}  // namespace

void decode_int16_rows_q6_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  HWY_DYNAMIC_DISPATCH(DecodeQ6K)(rows, row_stride, count, out);
}
}  // namespace deferkv
#endif
