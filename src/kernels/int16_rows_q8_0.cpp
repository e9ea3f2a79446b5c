// Q8_0 rows as integers for gemm_int16 (int16_rows.h): q = the int8 values, scale = d.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/int16_rows_q8_0.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/int16_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

void DecodeQ80(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  const ExactCappedTag<int16_t, 16> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  constexpr size_t L = hn::MaxLanes(d16);
  const int64_t nb = out.n / kQ32;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      out.scale[r * nb + b] = F16ToF32(blocks[b].d);
      const int64_t k0 = b * kQ32;
      for (size_t k = 0; k < kQ32; k += L) hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, blocks[b].qs + k)), d16, out.at(r, k0 + k));
    }
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(DecodeQ80);
}  // namespace

void decode_int16_rows_q8_0(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  HWY_DYNAMIC_DISPATCH(DecodeQ80)(rows, row_stride, count, out);
}
}  // namespace deferkv
#endif
