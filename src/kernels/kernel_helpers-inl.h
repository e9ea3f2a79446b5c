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

// One fp16 value (a block scale) to float; a single F16C instruction where available. The
// bits are copied into an fp16 object, not read through a cast pointer, which breaks
// type-based aliasing: GCC moved SVE's load of them above their store (garbage scales).
HWY_INLINE float F16ToF32(uint16_t bits) {
  hwy::float16_t value;
  std::memcpy(&value, &bits, sizeof value);
  return hn::GetLane(LoadF16AsF32(hn::CappedTag<float, 1>(), &value));
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

// CappedTag<T, kLimit> for the kernels that lay a quantised block's values out in vectors
// by their lane count at compile time (MaxLanes). That is the lane count on the targets of
// fixed width (x86, NEON, SVE_256, SVE2_128) but only a bound on Highway's length-agnostic
// SVE ones (vectors of 128 to 2048 bits), where these vectors are 128 bits, the width
// every SVE CPU has (the float kernels take whole vectors there).
#if HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2
template <class T, size_t kLimit>
using ExactCappedTag = hn::CappedTag<T, HWY_MIN(kLimit, 16 / sizeof(T))>;
#else
template <class T, size_t kLimit>
using ExactCappedTag = hn::CappedTag<T, kLimit>;
#endif

// DEFERKV_VECTORS(V, name, dims...) declares `name`, an array of vectors V (uninitialised)
// of shape dims: DEFERKV_VECTORS(V, acc, 3, 4) is V acc[3][4]. For the register tiles, whose
// indices are Unroll's constants. On SVE, whose vectors are sizeless types that C++ allows
// neither in arrays nor in classes, it declares up to 16 separate vectors instead and
// `name` is a table of their addresses, indexed the same way: once the indices are
// constants, GCC folds the table away and keeps the vectors in registers as it does an
// array. Everywhere else it is the plain array. (V must name its type without a comma.)
namespace detail {

template <class V, size_t... kDims>
struct ArrayOf {
  using type = V;
};
template <class V, size_t N, size_t... kRest>
struct ArrayOf<V, N, kRest...> {
  using type = typename ArrayOf<V, kRest...>::type[N];
};

#if HWY_HAVE_SCALABLE
inline constexpr size_t kMaxTableVectors = 16;

// The addresses of the vectors, row-major: pointers in one dimension, sub-tables in more.
template <class V, size_t... kDims>
class VectorTable;

template <class V, size_t N>
class VectorTable<V, N> {
 public:
  static constexpr size_t kSize = N;
  static_assert(kSize <= kMaxTableVectors, "DEFERKV_VECTORS declares 16 vectors");
  HWY_INLINE explicit VectorTable(V* const* vectors) : VectorTable(vectors, std::make_index_sequence<N>{}) {}
  HWY_INLINE V& operator[](size_t i) const { return *entries_[i]; }

 private:
  template <size_t... I>
  HWY_INLINE VectorTable(V* const* vectors, std::index_sequence<I...>) : entries_{vectors[I]...} {}
  V* entries_[N];
};

template <class V, size_t N, size_t... kRest>
  requires(sizeof...(kRest) > 0)
class VectorTable<V, N, kRest...> {
  using Sub = VectorTable<V, kRest...>;

 public:
  static constexpr size_t kSize = N * Sub::kSize;
  static_assert(kSize <= kMaxTableVectors, "DEFERKV_VECTORS declares 16 vectors");
  HWY_INLINE explicit VectorTable(V* const* vectors) : VectorTable(vectors, std::make_index_sequence<N>{}) {}
  HWY_INLINE const Sub& operator[](size_t i) const { return entries_[i]; }

 private:
  template <size_t... I>
  HWY_INLINE VectorTable(V* const* vectors, std::index_sequence<I...>)
      : entries_{Sub(vectors + I * Sub::kSize)...} {}
  Sub entries_[N];
};

template <class V>
struct VectorAddresses {
  V* p[kMaxTableVectors];
};
#endif

}  // namespace detail

#undef DEFERKV_VECTORS  // per target
#if HWY_HAVE_SCALABLE
#define DEFERKV_VECTORS(V, name, ...)                                                                           \
  V name##_0_, name##_1_, name##_2_, name##_3_, name##_4_, name##_5_, name##_6_, name##_7_, name##_8_,          \
      name##_9_, name##_10_, name##_11_, name##_12_, name##_13_, name##_14_, name##_15_;                        \
  const detail::VectorTable<V, __VA_ARGS__> name(detail::VectorAddresses<V>{{                                   \
      &name##_0_, &name##_1_, &name##_2_, &name##_3_, &name##_4_, &name##_5_, &name##_6_, &name##_7_,           \
      &name##_8_, &name##_9_, &name##_10_, &name##_11_, &name##_12_, &name##_13_, &name##_14_, &name##_15_}}.p)
#else
#define DEFERKV_VECTORS(V, name, ...) typename detail::ArrayOf<V, __VA_ARGS__>::type name
#endif

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

// out[k] = the sum of v[k]'s lanes, k < 4, each by one tree whatever the other vectors hold
// (lanes i and i + 2 of each 128-bit block, then the two pairs, then the blocks), so a row's
// sum is the same bits whichever rows or activations it is reduced with. Four at once: a
// decode step's weight rows can be short (three Q4_K blocks at n_embd 768), and one
// horizontal sum per row then cost a tenth of the Q4_K matvec on Zen 4.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
template <class DF>
HWY_INLINE auto FoldBlocks(DF df, hn::Vec<DF> v) {
  if constexpr (hn::MaxLanes(df) * sizeof(float) <= 16) {
    return v;
  } else {
    const hn::Half<DF> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}
#endif

template <class DF>
HWY_INLINE void StoreSumsOfLanes4(DF df, hn::Vec<DF> v0, hn::Vec<DF> v1, hn::Vec<DF> v2, hn::Vec<DF> v3,
                                  float* out) {
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(df) >= 4) {
    const hn::Repartition<uint64_t, DF> d64;
    const auto t0 = hn::BitCast(d64, hn::Add(hn::InterleaveLower(df, v0, v1), hn::InterleaveUpper(df, v0, v1)));
    const auto t1 = hn::BitCast(d64, hn::Add(hn::InterleaveLower(df, v2, v3), hn::InterleaveUpper(df, v2, v3)));
    const auto sums = hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, t0, t1)),
                              hn::BitCast(df, hn::InterleaveUpper(d64, t0, t1)));  // [v0, v1, v2, v3] per block
    const auto folded = FoldBlocks(df, sums);
    hn::StoreU(folded, hn::DFromV<decltype(folded)>(), out);
    return;
  }
#endif
  out[0] = hn::GetLane(hn::SumOfLanes(df, v0));
  out[1] = hn::GetLane(hn::SumOfLanes(df, v1));
  out[2] = hn::GetLane(hn::SumOfLanes(df, v2));
  out[3] = hn::GetLane(hn::SumOfLanes(df, v3));
}

// y[i * ldy + r] = dot(row r, x_i) for M activations x_i and weights stored in blocks:
// block_fma(row, b, acc) adds block b's share of row r's dot product with x_i to acc[i]
// (float lanes, summed at the end) for each i < M. Rows are taken one at a time, front
// to back: reading several rows at once (to share activation loads) measured slower
// here for matrices streamed from DRAM. Even and odd blocks go to separate
// accumulators, so two FMA chains overlap. The lane sums go four at a time
// (StoreSumsOfLanes4: four rows of one activation, or a row's activations), each by the same
// tree, so y is bit for bit the same whatever M is.
template <size_t M, class DF, class BlockFma>
HWY_INLINE void MatvecByBlocks(DF df, const void* w, size_t stride, int64_t nb, float* y, int64_t ldy,
                               int64_t rows, const BlockFma& block_fma) {
  static_assert(M <= 4, "one StoreSumsOfLanes4 per row");
  const auto* base = static_cast<const uint8_t*>(w);
  // total[i] = the lanes whose sum is dot(row r, x_i).
  const auto row_dots = [&](int64_t r, auto& total) DEFERKV_INLINE_LAMBDA {
    const uint8_t* row = base + r * stride;
    DEFERKV_VECTORS(hn::Vec<DF>, acc0, M);
    DEFERKV_VECTORS(hn::Vec<DF>, acc1, M);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { acc0[i] = acc1[i] = hn::Zero(df); });
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      block_fma(row, b, acc0);
      block_fma(row, b + 1, acc1);
    }
    if (b < nb) block_fma(row, b, acc0);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { total[i] = hn::Add(acc0[i], acc1[i]); });
  };
  int64_t r = 0;
  if constexpr (M == 1) {
    for (; r + 4 <= rows; r += 4) {
      DEFERKV_VECTORS(hn::Vec<DF>, t0, 1);
      DEFERKV_VECTORS(hn::Vec<DF>, t1, 1);
      DEFERKV_VECTORS(hn::Vec<DF>, t2, 1);
      DEFERKV_VECTORS(hn::Vec<DF>, t3, 1);
      row_dots(r, t0);
      row_dots(r + 1, t1);
      row_dots(r + 2, t2);
      row_dots(r + 3, t3);
      StoreSumsOfLanes4(df, t0[0], t1[0], t2[0], t3[0], y + r);
    }
  }
  for (; r < rows; ++r) {
    DEFERKV_VECTORS(hn::Vec<DF>, total, M);
    row_dots(r, total);
    DEFERKV_VECTORS(hn::Vec<DF>, four, 4);
    Unroll<4>([&](auto i) DEFERKV_INLINE_LAMBDA { four[i] = hn::Zero(df); });
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { four[i] = total[i]; });
    float sums[4];
    StoreSumsOfLanes4(df, four[0], four[1], four[2], four[3], sums);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { y[static_cast<int64_t>(i) * ldy + r] = sums[i]; });
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

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
