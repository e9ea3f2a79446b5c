// The SIMD matvec over row groups (row_groups.h) on x86 with AVX2 or AVX-512, in 256-bit
// vectors: one int32 lane per row of the group. For each 32 bytes of a group (four bytes
// of each of its eight rows) the nibbles are split once, and for each activation a
// broadcast of the matching four activation bytes meets them in vpmaddubsw; the int16
// pairs add up over a whole sub-block (at most 8 * 2 * 15 * 127 = 30480, no saturation),
// then one vpmaddwd with the eight rows' scales (Q4_K) or with ones (Q4_0) gives int32
// lanes. The float steps are row_groups.cpp's portable ones lane for lane, so the bits are
// the same. Other targets take the portable code (row_groups_in_simd).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_row_groups.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"
#include "kernels/row_groups.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

// Activations per pass over a group's blocks: each holds two int16 sums, an int32 sum and
// a float sum in registers; four fit AVX-512's 32 vector registers, two AVX2's 16.
constexpr size_t kActivations = HWY_TARGET == HWY_AVX2 ? 2 : 4;
// Groups per tile: read from memory by the first activations, from cache by the others.
constexpr int64_t kTileGroups = 4;

// Four activation bytes in every 32-bit lane.
HWY_INLINE __m256i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The eight rows' bytes s[0..7] as int16 pairs [s0, s0, s1, s1, ...].
HWY_INLINE __m256i BytePairs(const uint8_t* s) {
  int64_t v;
  std::memcpy(&v, s, 8);
  const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                        4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
  return _mm256_shuffle_epi8(_mm256_set1_epi64x(v), pick);
}

HWY_INLINE __m256 HalfsToFloats(const uint16_t* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}


template <size_t M>
HWY_INLINE void GroupQ4_0(const GroupBlockQ4_0* blocks, int64_t nb, const PackedActivationInt8 (&x)[M],
                          float* y, int64_t ldy) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[M];
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { acc[i] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const GroupBlockQ4_0& gb = blocks[b];
    __m256i sum16[M];
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum16[i] = _mm256_setzero_si256(); });
    Unroll<4>([&](auto k) DEFERKV_INLINE_LAMBDA {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb.qs[k]));
      const __m256i lo = _mm256_and_si256(q, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        const int8_t* xq = x[i].q + b * kQ32 + 4 * k;
        sum16[i] = _mm256_add_epi16(sum16[i], _mm256_maddubs_epi16(lo, Broadcast4(xq)));
        sum16[i] = _mm256_add_epi16(sum16[i], _mm256_maddubs_epi16(hi, Broadcast4(xq + 16)));
      });
    });
    const __m256 d = HalfsToFloats(gb.d);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      const __m256i offset = _mm256_set1_epi32(8 * x[i].sums[b]);
      const __m256i sum = _mm256_sub_epi32(_mm256_madd_epi16(sum16[i], ones), offset);
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(d, _mm256_set1_ps(x[i].d[b])), acc[i]);
    });
  }
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { _mm256_storeu_ps(y + static_cast<int64_t>(i) * ldy, acc[i]); });
}

template <size_t M>
HWY_INLINE void GroupQ4_K(const GroupBlockQ4_K* blocks, int64_t nb, const PackedActivationInt8 (&x)[M],
                          float* y, int64_t ldy) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  __m256 acc[M];
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { acc[i] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const GroupBlockQ4_K& gb = blocks[b];
    __m256i sum[M];
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { sum[i] = _mm256_setzero_si256(); });
    for (int c = 0; c < 4; ++c) {
      __m256i lo16[M], hi16[M];
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { lo16[i] = hi16[i] = _mm256_setzero_si256(); });
      Unroll<8>([&](auto k) DEFERKV_INLINE_LAMBDA {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb.qs[c][k]));
        const __m256i lo = _mm256_and_si256(q, mask);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
        Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
          const int8_t* xq = x[i].q + b * kQK + 64 * c + 4 * k;
          lo16[i] = _mm256_add_epi16(lo16[i], _mm256_maddubs_epi16(lo, Broadcast4(xq)));
          hi16[i] = _mm256_add_epi16(hi16[i], _mm256_maddubs_epi16(hi, Broadcast4(xq + 32)));
        });
      });
      const __m256i scale_lo = BytePairs(gb.scales[2 * c]);
      const __m256i scale_hi = BytePairs(gb.scales[2 * c + 1]);
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        sum[i] = _mm256_add_epi32(sum[i], _mm256_add_epi32(_mm256_madd_epi16(lo16[i], scale_lo),
                                                           _mm256_madd_epi16(hi16[i], scale_hi)));
      });
    }
    __m256i mins[4];
    Unroll<4>([&](auto p) DEFERKV_INLINE_LAMBDA {
      mins[p] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb.mins[p])));
    });
    const __m256 d = HalfsToFloats(gb.d);
    const __m256 dmin = HalfsToFloats(gb.dmin);
    Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
      const int16_t* xsum = x[i].sums + b * 8;
      __m256i min_sum = _mm256_madd_epi16(mins[0], Broadcast4(xsum));
      min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(mins[1], Broadcast4(xsum + 2)));
      min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(mins[2], Broadcast4(xsum + 4)));
      min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(mins[3], Broadcast4(xsum + 6)));
      const __m256 dx = _mm256_set1_ps(x[i].d[b]);
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i]), _mm256_mul_ps(d, dx), acc[i]);
      acc[i] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_mul_ps(dmin, dx), acc[i]);
    });
  }
  Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA { _mm256_storeu_ps(y + static_cast<int64_t>(i) * ldy, acc[i]); });
}

// Groups [0, rows / 8) in tiles of kTileGroups, activations in passes of kActivations
// (then one pass of the rest) over each tile.
template <class GroupBlock, class Group>
HWY_INLINE void ForTiles(const void* groups, int64_t n, int block, const void* packed, size_t packed_stride,
                         int64_t m, float* y, int64_t ldy, int64_t rows, const Group& group) {
  const int64_t nb = n / block;
  const auto* base = static_cast<const GroupBlock*>(groups);
  const auto* xs = static_cast<const uint8_t*>(packed);
  const int64_t count = rows / kGroupRows;
  for (int64_t t = 0; t < count; t += kTileGroups) {
    const int64_t end = t + kTileGroups < count ? t + kTileGroups : count;
    int64_t first = 0;
    const auto pass = [&](auto size) DEFERKV_INLINE_LAMBDA {
      constexpr size_t M = decltype(size)::value;
      PackedActivationInt8 x[M];
      Unroll<M>([&](auto i) DEFERKV_INLINE_LAMBDA {
        x[i] = packed_view_int8(xs + static_cast<size_t>(first + static_cast<int64_t>(i)) * packed_stride, n, block);
      });
      for (int64_t g = t; g < end; ++g) group(base + g * nb, nb, x, y + first * ldy + g * kGroupRows, ldy);
    };
    for (; first + static_cast<int64_t>(kActivations) <= m; first += kActivations) {
      pass(std::integral_constant<size_t, kActivations>{});
    }
    Unroll<kActivations>([&](auto rest) DEFERKV_INLINE_LAMBDA {
      if constexpr (rest != 0) {
        if (m - first == static_cast<int64_t>(rest)) pass(rest);
      }
    });
  }
}

void MatvecRowGroups(DType type, const void* groups, int64_t n, const void* packed, size_t packed_stride, int64_t m,
                     float* y, int64_t ldy, int64_t rows) {
  if (type == DType::Q4_0) {
    ForTiles<GroupBlockQ4_0>(groups, n, kQ32, packed, packed_stride, m, y, ldy, rows,
                             [](const GroupBlockQ4_0* blocks, int64_t nb, const auto& x, float* out, int64_t ld)
                                 DEFERKV_INLINE_LAMBDA { GroupQ4_0(blocks, nb, x, out, ld); });
  } else {
    ForTiles<GroupBlockQ4_K>(groups, n, kQK, packed, packed_stride, m, y, ldy, rows,
                             [](const GroupBlockQ4_K* blocks, int64_t nb, const auto& x, float* out, int64_t ld)
                                 DEFERKV_INLINE_LAMBDA { GroupQ4_K(blocks, nb, x, out, ld); });
  }
}

bool Available() { return true; }

#else

void MatvecRowGroups(DType, const void*, int64_t, const void*, size_t, int64_t, float*, int64_t, int64_t) {}
bool Available() { return false; }

#endif

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(MatvecRowGroups);
HWY_EXPORT(Available);
}  // namespace

void matvec_row_groups_simd(DType type, const void* groups, int64_t n, const void* packed, size_t packed_stride,
                            int64_t m, float* y, int64_t ldy, int64_t rows) {
  HWY_DYNAMIC_DISPATCH(MatvecRowGroups)(type, groups, n, packed, packed_stride, m, y, ldy, rows);
}

bool row_groups_simd_available() { return HWY_DYNAMIC_DISPATCH(Available)(); }
}  // namespace deferkv
#endif
