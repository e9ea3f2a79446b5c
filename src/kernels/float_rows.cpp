// fp16 / bf16 rows to float32 (float_rows.h): whole vectors, then a scalar tail; q8_0 /
// q4_0 blocks of 32 as vectors of at most 16 lanes (which divide a block).
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

// x = q * d: int8 lanes widened to int32, converted, times the block's scale (the same
// single rounding as the scalar code).
void Q8_0RowToF32(const BlockQ8_0* blocks, float* dst, int64_t n_blocks) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t L = hn::Lanes(df);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQ32) {
    const auto d = hn::Set(df, F16ToF32(blocks[b].d));
    for (size_t j = 0; j < kQ32; j += L) {
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, blocks[b].qs + j))), d), df, dst + j);
    }
  }
}

// x[j] = ((qs[j] & 15) - 8) * d and x[j + 16] = ((qs[j] >> 4) - 8) * d.
void Q4_0RowToF32(const BlockQ4_0* blocks, float* dst, int64_t n_blocks) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t L = hn::Lanes(df);
  const auto eight = hn::Set(di, 8), fifteen = hn::Set(di, 15);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQ32) {
    const auto d = hn::Set(df, F16ToF32(blocks[b].d));
    for (size_t j = 0; j < kQ32 / 2; j += L) {
      const auto q = hn::BitCast(di, hn::PromoteTo(hn::Rebind<uint32_t, decltype(df)>(), hn::LoadU(d8, blocks[b].qs + j)));
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::And(q, fifteen), eight)), d), df, dst + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(q), eight)), d), df, dst + j + kQ32 / 2);
    }
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(Fp16RowToF32);
HWY_EXPORT(Bf16RowToF32);
HWY_EXPORT(Q8_0RowToF32);
HWY_EXPORT(Q4_0RowToF32);
}  // namespace

void fp16_row_to_fp32(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Fp16RowToF32)(src, dst, n);
}
void bf16_row_to_fp32(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Bf16RowToF32)(src, dst, n);
}
void q8_0_row_to_fp32(const BlockQ8_0* blocks, float* dst, int64_t n_blocks) {
  HWY_DYNAMIC_DISPATCH(Q8_0RowToF32)(blocks, dst, n_blocks);
}
void q4_0_row_to_fp32(const BlockQ4_0* blocks, float* dst, int64_t n_blocks) {
  HWY_DYNAMIC_DISPATCH(Q4_0RowToF32)(blocks, dst, n_blocks);
}
}  // namespace deferkv
#endif
