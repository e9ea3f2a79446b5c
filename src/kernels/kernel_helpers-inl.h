// Small per-target helpers shared by the Highway kernels. Included (after
// <hwy/highway.h>) once per target, hence the toggle guard instead of #pragma once.
#if defined(DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#undef DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#else
#define DEFERKV_KERNELS_KERNEL_HELPERS_INL_H_
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <hwy/highway.h>

#include "kernels/packed_activation.h"
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

// The 16 bits of an fp16 value. Highway's float16_t is a struct holding them on x86 but the
// compiler's own __fp16 on aarch64 (GCC), which has no .bits (the aarch64 build,
// scripts/test_aarch64.sh, did not compile with .bits).
HWY_INLINE uint16_t F16Bits(hwy::float16_t v) {
  uint16_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Loads fp16 lanes as float32. Highway 1.0.3's portable fallbacks (SCALAR, and EMU128, the
// one clang builds) turn fp16 infinities and NaNs into finite numbers (65504 for inf: found
// by Fp16.SimdRowConversionsMatchScalar in clang's sanitizer build), so they convert each
// lane with the exact scalar function instead.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16AsF32(DF df, const hwy::float16_t* p) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  HWY_ALIGN float lanes[hn::MaxLanes(df)];
  for (size_t i = 0; i < hn::Lanes(df); ++i) lanes[i] = fp16_to_fp32(F16Bits(p[i]));
  return hn::Load(df, lanes);
#else
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
#endif
}

// Lanes of a float32, fp16 or bf16 row as float32, and one element of it (for the tail
// past the whole vectors): the float kernels' loads by element type.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::float16_t* p) {
  return LoadF16AsF32(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::bfloat16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}
inline float ToF32(float v) { return v; }
inline float ToF32(hwy::float16_t v) { return fp16_to_fp32(F16Bits(v)); }
inline float ToF32(hwy::bfloat16_t v) { return bf16_to_fp32(v.bits); }

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

// Activations per group (ForTilesAndGroups) in the quantised kernels: each activation
// of a group holds two float accumulators and an int32 sum in registers besides the
// decoded weights, so four fit AVX2's sixteen vector registers.
inline constexpr size_t kMatvecGroup = 4;

// Weight rows per tile in ForTilesAndGroups: 16 rows of a 4096-wide quantised matrix
// (under 70 KiB of Q8_0) stay in L1/L2 while every group of activations passes over them.
inline constexpr int64_t kRowTile = 16;

// The multi-row kernels take the m activations (tokens) in groups of up to G, each
// group's M activations against one weight row at a time, so that a weight block is
// loaded and decoded once per group. Calls fn(std::integral_constant<size_t, M>{},
// first, r0, count) for weight rows [r0, r0 + count) in tiles of kRowTile (read from
// memory by the first group, from cache by the others), and within a tile for
// activations [first, first + M): groups of G, then one group of the remainder.
template <size_t G, class Fn>
HWY_INLINE void ForTilesAndGroups(int64_t m, int64_t rows, const Fn& fn) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRowTile) {
    const int64_t count = rows - r0 < kRowTile ? rows - r0 : kRowTile;
    int64_t first = 0;
    for (; first + static_cast<int64_t>(G) <= m; first += G) fn(std::integral_constant<size_t, G>{}, first, r0, count);
    Unroll<G>([&](auto rest) DEFERKV_INLINE_LAMBDA {
      if constexpr (rest != 0) {
        if (m - first == static_cast<int64_t>(rest)) fn(rest, first, r0, count);
      }
    });
  }
}

// y[i * ldy + r] = dot(row r, x_i) for M activations x_i and weights stored in blocks:
// block_fma(row, b, acc) adds block b's share of row r's dot product with x_i to acc[i]
// (float lanes, summed at the end) for each i < M. Rows are taken one at a time, front
// to back: reading several rows at once (to share activation loads) measured slower
// here for matrices streamed from DRAM. Even and odd blocks go to separate
// accumulators, so two FMA chains overlap. Each x_i's accumulators see the same
// operations in the same order whatever M is, so y is bit for bit the same as with M = 1.
template <size_t M, class DF, class BlockFma>
HWY_INLINE void MatvecByBlocks(DF df, const void* w, size_t stride, int64_t nb, float* y, int64_t ldy,
                               int64_t rows, const BlockFma& block_fma) {
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = base + r * stride;
    hn::Vec<DF> acc0[M], acc1[M];
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { acc0[i] = acc1[i] = hn::Zero(df); });
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      block_fma(row, b, acc0);
      block_fma(row, b + 1, acc1);
    }
    if (b < nb) block_fma(row, b, acc0);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      y[static_cast<int64_t>(i) * ldy + r] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[i], acc1[i])));
    });
  }
}

// The M activations starting at `first` of m packed ones `stride` bytes apart.
template <size_t M>
HWY_INLINE std::array<PackedActivation, M> PackedViews(const void* packed, size_t stride, int64_t first, int64_t n,
                                                       int block) {
  std::array<PackedActivation, M> views;
  const auto* base = static_cast<const uint8_t*>(packed) + static_cast<size_t>(first) * stride;
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { views[i] = packed_view(base + i * stride, n, block); });
  return views;
}

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3
// The int8 K-quant kernels' step (matvec_k4_int8.cpp, matvec_q6_k.cpp): sum + the products
// of unsigned weight bytes w and signed activation bytes x, summed in fours and multiplied by
// the int16 sub-block scales. vpdpbusd then vpdpwssd on AVX3_DL, written out because Highway
// 1.0 has no VNNI ops and does not compile AVX3_DL with avx512vnni (gemm_int16.cpp's
// DotPairs does the same); maddubs then madd on AVX3.
HWY_INLINE __m512i AddScaledByteDots(__m512i sum, __m512i w, __m512i x, __m512i scale) {
#if HWY_TARGET == HWY_AVX3_DL
  __m512i partial = _mm512_setzero_si512();
  asm("vpdpbusd %[x], %[w], %[p]" : [p] "+v"(partial) : [w] "v"(w), [x] "v"(x));
  asm("vpdpwssd %[scale], %[p], %[s]" : [s] "+v"(sum) : [p] "v"(partial), [scale] "v"(scale));
  return sum;
#else
  return _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(w, x), scale));
#endif
}
#endif

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
