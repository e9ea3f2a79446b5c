// F32, F16 and BF16 weights x float32 activation: weights are converted to f32 in
// registers and FMA'd with x.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_float.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/quant.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

// DF: the float vector the weights are converted into (see MatvecF16).
// R rows at a time with 4 / R accumulators each (four FMA chains in flight). How many
// rows to stream at once was measured (4096-wide rows, single thread, from L3 and from
// DRAM): F32 is fastest with four, F16 and BF16 with one, as are the quantised types
// (see MatvecByBlocks). Activations go in groups of up to G (ForTilesAndGroups), each
// weight vector loaded and converted once for the group; R * G * 4 / R accumulators
// must fit in registers with the weights, so G is smaller than the quantised kernels'.
// An activation's accumulators see the same operations in the same order whatever
// group it is in.
template <typename T, size_t R, size_t G, class DF = hn::ScalableTag<float>>
void MatvecFloat(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                 float* y, int64_t ldy, int64_t rows) {
  constexpr size_t A = 4 / R;
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto* base = static_cast<const uint8_t*>(w);
  ForTilesAndGroups<G>(m, rows, [&](auto group, int64_t first, int64_t tile, int64_t tile_rows) {
    constexpr size_t M = decltype(group)::value;
    const float* x[M];
    Unroll<M>([&](auto j) DEFERKV_INLINE_LAMBDA {
      x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(packed) + (first + j) * packed_stride);
    });
    int64_t r0 = tile;
    auto rows_at = [&](auto row_group) {
      constexpr size_t RG = decltype(row_group)::value;
      const T* row[RG];
      DEFERKV_VECTORS(hn::Vec<decltype(df)>, acc, RG, M, A);
      Unroll<RG>([&](auto r) DEFERKV_INLINE_LAMBDA {
        row[r] = reinterpret_cast<const T*>(base + (r0 + static_cast<int64_t>(r)) * stride);
        Unroll<M>([&](auto j) DEFERKV_INLINE_LAMBDA {
          Unroll<A>([&](auto a) DEFERKV_INLINE_LAMBDA { acc[r][j][a] = hn::Zero(df); });
        });
      });
      // acc[.][.][a] += w * x for the RG rows' and M activations' vectors at offset i.
      const auto fma_at = [&](int64_t i, auto a) DEFERKV_INLINE_LAMBDA {
        DEFERKV_VECTORS(hn::Vec<decltype(df)>, wv, RG);
        Unroll<RG>([&](auto r) DEFERKV_INLINE_LAMBDA { wv[r] = LoadF32(df, row[r] + i); });
        Unroll<M>([&](auto j) DEFERKV_INLINE_LAMBDA {
          const auto xv = hn::LoadU(df, x[j] + i);
          Unroll<RG>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r][j][a] = hn::MulAdd(wv[r], xv, acc[r][j][a]); });
        });
      };
      int64_t i = 0;
      for (; i + static_cast<int64_t>(A) * L <= n; i += A * L) {
        Unroll<A>([&](auto a) DEFERKV_INLINE_LAMBDA { fma_at(i + a * L, a); });
      }
      for (; i + L <= n; i += L) fma_at(i, std::integral_constant<size_t, 0>{});
      Unroll<RG>([&](auto r) DEFERKV_INLINE_LAMBDA {
        Unroll<M>([&](auto j) DEFERKV_INLINE_LAMBDA {
          auto total = acc[r][j][0];
          for (size_t a = 1; a < A; ++a) total = hn::Add(total, acc[r][j][a]);
          float sum = hn::GetLane(hn::SumOfLanes(df, total));
          for (int64_t t = i; t < n; ++t) sum += ToF32(row[r][t]) * x[j][t];
          y[(first + static_cast<int64_t>(j)) * ldy + r0 + static_cast<int64_t>(r)] = sum;
        });
      });
    };
    for (; r0 + static_cast<int64_t>(R) <= tile + tile_rows; r0 += R) rows_at(std::integral_constant<size_t, R>{});
    for (; r0 < tile + tile_rows; ++r0) rows_at(std::integral_constant<size_t, 1>{});
  });
}

void MatvecF32(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
               float* y, int64_t ldy, int64_t rows) {
  MatvecFloat<float, 4, 2>(w, stride, n, packed, packed_stride, m, y, ldy, rows);
}
// F16 weights convert in 256-bit vectors (8 floats) on every target: on Zen 4 the AVX-512
// conversion (vcvtph2ps to a zmm) made one-thread decode of the 100M F16 model 37% slower
// than the AVX2 build of this same kernel (63 against 100 tokens/s; bench/README.md, "F16
// decode in 256-bit vectors"). BF16's promotion has no such cost there and keeps the full
// width. Measured on Zen 4 only.
void MatvecF16(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
               float* y, int64_t ldy, int64_t rows) {
  MatvecFloat<hwy::float16_t, 1, 3, hn::CappedTag<float, 8>>(w, stride, n, packed, packed_stride, m, y, ldy, rows);
}
void MatvecBF16(const void* w, size_t stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  MatvecFloat<hwy::bfloat16_t, 1, 3>(w, stride, n, packed, packed_stride, m, y, ldy, rows);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecF32);
HWY_EXPORT(MatvecF16);
HWY_EXPORT(MatvecBF16);
}  // namespace

void matvec_f32(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecF32)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
void matvec_f16(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecF16)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
void matvec_bf16(const void* w, size_t row_stride, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecBF16)(w, row_stride, n, packed, packed_stride, m, y, ldy, rows);
}
}  // namespace deferkv
#endif
