// Small per-target helpers shared by the Highway kernels. Included (after
// <hwy/highway.h>) once per target, hence the toggle guard instead of #pragma once.
#if defined(DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#undef DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#else
#define DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#endif

#include <cstdint>
#include <type_traits>
#include <utility>

#include <hwy/highway.h>

#include "kernels/quant.h"

// For lambdas in kernel loops (the per-block lambdas handed to MatvecByBlocks and the
// bodies given to Unroll), which GCC would otherwise leave out of line when they are
// large and called from more than one place: [&](...) DEFERKV_INLINE_LAMBDA { ... }.
#ifndef DEFERKV_INLINE_LAMBDA
#define DEFERKV_INLINE_LAMBDA __attribute__((always_inline))
#endif

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads fp16 lanes as float32. Highway 1.0.3's one-lane target turns fp16 inf and NaN
// into finite numbers, so that target uses the exact scalar conversion instead.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16AsF32(DF df, const hwy::float16_t* p) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(df, fp16_to_fp32(p->bits));
#else
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
#endif
}

// One fp16 value (a block scale) to float; a single F16C instruction where available.
HWY_INLINE float F16ToF32(uint16_t bits) {
  return hn::GetLane(LoadF16AsF32(hn::CappedTag<float, 1>(), reinterpret_cast<const hwy::float16_t*>(&bits)));
}

// Calls fn(std::integral_constant<size_t, i>{}) for i = 0 .. N-1, unrolled at compile
// time (the build uses -O2, which does not unroll loops): arrays of vectors indexed by
// i then live in registers.
template <size_t N, class Fn>
HWY_INLINE void Unroll(const Fn& fn) {
  [&]<size_t... I>(std::index_sequence<I...>) DEFERKV_INLINE_LAMBDA {
    (fn(std::integral_constant<size_t, I>{}), ...);
  }(std::make_index_sequence<N>{});
}

// y[r] = dot(row r, x) for weights stored in blocks: block_fma(row, b, acc) returns acc
// plus block b's share of the row's dot product (in float lanes, summed at the end).
// Rows are taken one at a time, front to back: reading several rows at once (to share
// activation loads) measured slower here for matrices streamed from DRAM. Even and odd
// blocks go to separate accumulators, so two FMA chains overlap.
template <class DF, class BlockFma>
HWY_INLINE void MatvecByBlocks(DF df, const void* w, size_t stride, int64_t nb, float* y, int64_t rows,
                               const BlockFma& block_fma) {
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = base + r * stride;
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      acc0 = block_fma(row, b, acc0);
      acc1 = block_fma(row, b + 1, acc1);
    }
    if (b < nb) acc0 = block_fma(row, b, acc0);
    y[r] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  }
}

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
