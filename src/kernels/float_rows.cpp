// fp16 / bf16 rows to float32 (float_rows.h): whole vectors, then a scalar tail.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/float_rows.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/float_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/quant.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

template <class Load>
HWY_INLINE void RowToF32(const uint16_t* src, float* dst, int64_t n, const Load& load,
                         float (*scalar)(uint16_t)) {
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(load(df, src + i), df, dst + i);
  for (; i < n; ++i) dst[i] = scalar(src[i]);
}

void Fp16RowToF32(const uint16_t* src, float* dst, int64_t n) {
  RowToF32(
      src, dst, n,
      [](auto df, const uint16_t* p) { return LoadF16AsF32(df, reinterpret_cast<const hwy::float16_t*>(p)); },
      fp16_to_fp32);
}
void Bf16RowToF32(const uint16_t* src, float* dst, int64_t n) {
  RowToF32(
      src, dst, n,
      [](auto df, const uint16_t* p) {
        return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, decltype(df)>(),
                                           reinterpret_cast<const hwy::bfloat16_t*>(p)));
      },
      bf16_to_fp32);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(Fp16RowToF32);
HWY_EXPORT(Bf16RowToF32);
}  // namespace

void fp16_row_to_fp32(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Fp16RowToF32)(src, dst, n);
}
void bf16_row_to_fp32(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Bf16RowToF32)(src, dst, n);
}
}  // namespace deferkv
#endif
