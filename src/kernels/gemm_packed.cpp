// gemm_f32_packed, gemm_f16_packed, their packings of the weight rows and gemm_pack_tokens
// (gemm.h): the prefill projections' product, with the weight rows packed into panels so
// that one vector load gives the same value k of several weight rows, and the tokens into
// panels of one micro-kernel's tokens.
//
// Why packed: gemm_f32_nt takes dot products along whole rows, so each register tile
// streams its RM token rows and RN weight rows (kilobytes each) through L1 and sums
// every accumulator across lanes at the end; at pp512 it ran at about 60% of an AVX2
// core's FMA peak, and two threads got 1.6-1.8x one. Here a micro-kernel keeps RM x 2
// vectors of outputs (RM tokens x one panel of 2 vectors' worth of weight rows) in
// registers and, for each k, broadcasts one activation per token against the panel's
// two vectors: no reduction across lanes, and with k cut into blocks whose panel slice
// fits L1 (kPanelBlockBytes), the weights come from L1 for every token tile. The tokens
// are packed once per product, for every thread: a tile's broadcasts then read one
// stream of consecutive floats instead of RM rows far apart (2-3% of an F16 prompt on
// Zen 3, bench/README.md "Prompts on two threads").
//
// F16 weights stay F16 in their panels and are widened as the micro-kernel loads them: the
// packing moves half the bytes and converts nothing, a k-block of L1 holds twice the k,
// and the 500M model's F16 products (m = 512, one thread) ran about 7% faster than with
// float32 panels on Zen 3 (bench/README.md, "F16 panels").
//
// Each output is summed in float32 one k-block at a time (an FMA chain over the block's k
// in order, then added to the sum of the blocks before it), so its value does not depend
// on the token count, the tiling or how the rows are split between threads; the blocks
// also keep the chains short (512 terms with AVX2, 256 with AVX-512), for accuracy.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_packed.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/kernel_helpers-inl.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

// Tokens per micro-kernel, and so per token panel: RM x 2 accumulators, the panel's two
// vectors and one broadcast must fit the register file (32 vector registers with
// AVX-512, 16 otherwise).
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kTileM = 12;
#else
constexpr size_t kTileM = 6;
#endif
static_assert(kTileM <= kGemmMaxPanelTokens);

// Bytes of one float32 panel's k-block: it stays in L1 (32-48 KiB) while every token tile
// of the call runs against it. 32 KiB (512 k with AVX2) ran the 500M model's products 2-4%
// faster than 16 KiB on Zen 3 (fewer passes over y), and as fast as 48 or 64 KiB; with
// AVX-512 the same bytes are 256 k. F16 panels take twice the k in the same bytes: 3-4%
// faster than the float32 panels' k-blocks on the same shapes (fewer passes over y).
constexpr int64_t kPanelBlockBytes = 32 << 10;
// Bytes of the tokens' k-block that every panel runs against before the next tokens: it
// stays in L2.
constexpr int64_t kTokenBlockBytes = 128 << 10;

// Panels of two vectors, of at most kGemmMaxPanelRows rows (gemm_packed_floats sizes
// buffers by it): whole vectors on x86 and NEON, at most 64 bytes of SVE's (up to 256).
using PanelTag = hn::CappedTag<float, kGemmMaxPanelRows / 2>;

int64_t PanelTokens() { return static_cast<int64_t>(kTileM); }

int64_t PanelRows() {
  const PanelTag df;
  return 2 * static_cast<int64_t>(hn::Lanes(df));
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Values k .. k + 7 of the 8 rows from `w` into the panel's columns from `out` (p apart):
// an 8 x 8 transpose in registers, where one value at a time cost a tenth of an F16 prompt
// on Zen 4 (PackRows in perf at pp512, 500M model).
HWY_INLINE void Transpose8x8(const float* w, int64_t ldw, float* out, int64_t p) {
  __m256 r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(w + j * ldw);
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = _mm256_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm256_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(out + j * p, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
    _mm256_storeu_ps(out + (4 + j) * p, _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
  }
}

// The same for F16 values kept F16: an 8 x 8 transpose of 16-bit lanes.
HWY_INLINE void Transpose8x8(const uint16_t* w, int64_t ldw, uint16_t* out, int64_t p) {
  __m128i r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j * ldw));
  for (int j = 0; j < 4; ++j) {  // t[2j], t[2j + 1]: rows 2j and 2j + 1 interleaved, k 0-3 and 4-7
    t[2 * j] = _mm_unpacklo_epi16(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm_unpackhi_epi16(r[2 * j], r[2 * j + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // u[4h + c]: rows 4h .. 4h + 3 of k 2c and 2c + 1
    u[4 * h + 0] = _mm_unpacklo_epi32(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm_unpackhi_epi32(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * c * p), _mm_unpacklo_epi64(u[c], u[4 + c]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * c + 1) * p), _mm_unpackhi_epi64(u[c], u[4 + c]));
  }
}
#endif

// Rows of T into panels of T: float32, or F16 bits.
template <class T>
void PackRowsOf(const T* w, int64_t ldw, int64_t rows, int64_t n, T* packed) {
  const int64_t p = PanelRows();
  for (int64_t r0 = 0; r0 < rows; r0 += p) {
    T* panel = packed + r0 * n;
    const int64_t count = std::min(p, rows - r0);
    int64_t k0 = 0;
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    if (count == p) {
      for (; k0 + 8 <= n; k0 += 8) {
        for (int64_t j = 0; j < p; j += 8) Transpose8x8(w + (r0 + j) * ldw + k0, ldw, panel + k0 * p + j, p);
      }
    }
#endif
    // k outer: the panel is written in order, and the p source lines being read stay in L1.
    for (int64_t k = k0; k < n; ++k) {
      T* out = panel + k * p;
      for (int64_t j = 0; j < count; ++j) out[j] = w[(r0 + j) * ldw + k];
      for (int64_t j = count; j < p; ++j) out[j] = T{0};
    }
  }
}

void PackRows(const float* w, int64_t ldw, int64_t rows, int64_t n, float* packed) {
  PackRowsOf(w, ldw, rows, n, packed);
}

void PackRowsF16(const uint16_t* w, int64_t ldw, int64_t rows, int64_t n, uint16_t* packed) {
  PackRowsOf(w, ldw, rows, n, packed);
}

// Tokens [first_panel * T, (first_panel + panels) * T) of x into their panels of `out`:
// panel p at out + p * T * n holds value k of its T tokens side by side at k * T; tokens
// past m are zeros.
void PackTokens(const float* x, int64_t ldx, int64_t n, int64_t m, int64_t first_panel, int64_t panels, float* out) {
  const auto T = static_cast<int64_t>(kTileM);
  for (int64_t p = first_panel; p < first_panel + panels; ++p) {
    float* panel = out + p * T * n;
    const int64_t count = std::clamp<int64_t>(m - p * T, 0, T);
    for (int64_t i = 0; i < count; ++i) {
      const float* row = x + (p * T + i) * ldx;
      for (int64_t k = 0; k < n; ++k) panel[k * T + i] = row[k];
    }
    for (int64_t i = count; i < T; ++i) {
      for (int64_t k = 0; k < n; ++k) panel[k * T + i] = 0.0f;
    }
  }
}

// One vector of a panel's row k, widened from F16 where the panel is F16.
template <class D>
HWY_INLINE hn::Vec<D> LoadPanel(D df, const float* p) {
  return hn::LoadU(df, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadPanel(D df, const hwy::float16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, D>(), p));
}

// y[i * ldy + j] (+)= sum over k < kc of x[k * T + i] * panel[k * P + j] for i < R,
// j < cols, x a token panel from its k-block on; `accumulate` adds the block's sums to
// those y holds.
template <size_t R, class PT>
HWY_INLINE void MicroTile(const float* x, const PT* panel, int64_t kc, float* y, int64_t ldy, int64_t cols,
                          bool accumulate) {
  const PanelTag df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  DEFERKV_VECTORS(hn::Vec<decltype(df)>, acc, R, 2);
  Unroll<R>([&](auto i) DEFERKV_INLINE_LAMBDA { acc[i][0] = acc[i][1] = hn::Zero(df); });
  for (int64_t k = 0; k < kc; ++k) {
    const auto w0 = LoadPanel(df, panel + k * 2 * L);
    const auto w1 = LoadPanel(df, panel + k * 2 * L + L);
    Unroll<R>([&](auto i) DEFERKV_INLINE_LAMBDA {
      const auto xv = hn::Set(df, x[k * static_cast<int64_t>(kTileM) + i]);
      acc[i][0] = hn::MulAdd(xv, w0, acc[i][0]);
      acc[i][1] = hn::MulAdd(xv, w1, acc[i][1]);
    });
  }
  HWY_ALIGN float part[2 * HWY_MAX_BYTES / sizeof(float)];
  const bool whole = cols == 2 * L;
  Unroll<R>([&](auto i) DEFERKV_INLINE_LAMBDA {
    float* out = y + i * ldy;
    if (whole) {
      if (accumulate) {
        acc[i][0] = hn::Add(acc[i][0], hn::LoadU(df, out));
        acc[i][1] = hn::Add(acc[i][1], hn::LoadU(df, out + L));
      }
      hn::StoreU(acc[i][0], df, out);
      hn::StoreU(acc[i][1], df, out + L);
    } else {
      hn::Store(acc[i][0], df, part);
      hn::Store(acc[i][1], df, part + L);
      for (int64_t j = 0; j < cols; ++j) out[j] = accumulate ? out[j] + part[j] : part[j];
    }
  });
}

// The last m % kTileM tokens: one instantiation per count.
template <class PT>
HWY_INLINE void MicroTileRest(int64_t rest, const float* x, const PT* panel, int64_t kc, float* y, int64_t ldy,
                              int64_t cols, bool accumulate) {
  Unroll<kTileM>([&](auto r) DEFERKV_INLINE_LAMBDA {
    if constexpr (r != 0) {
      if (rest == static_cast<int64_t>(r)) MicroTile<r>(x, panel, kc, y, ldy, cols, accumulate);
    }
  });
}

// Panels of PT: float, or hwy::float16_t.
template <class PT>
void GemmPackedOf(const float* tokens, int64_t m, const PT* packed, int64_t rows, int64_t n, float* y,
                  int64_t ldy) {
  const int64_t p = PanelRows();
  const int64_t block = std::max<int64_t>(1, kPanelBlockBytes / static_cast<int64_t>(sizeof(PT)) / p);
  const auto tile = static_cast<int64_t>(kTileM);
  const int64_t token_block =
      std::max<int64_t>(tile, kTokenBlockBytes / static_cast<int64_t>(sizeof(float)) / block / tile * tile);
  for (int64_t k0 = 0; k0 < n; k0 += block) {
    const int64_t kc = std::min(block, n - k0);
    const bool accumulate = k0 > 0;
    for (int64_t t0 = 0; t0 < m; t0 += token_block) {
      const int64_t t1 = std::min(m, t0 + token_block);
      for (int64_t r0 = 0; r0 < rows; r0 += p) {
        const PT* panel = packed + r0 * n + k0 * p;
        const int64_t cols = std::min(p, rows - r0);
        int64_t i = t0;  // a multiple of the tile: token i starts panel i / tile, at tokens + i * n
        for (; i + tile <= t1; i += tile) {
          MicroTile<kTileM>(tokens + i * n + k0 * tile, panel, kc, y + i * ldy + r0, ldy, cols, accumulate);
        }
        if (i < t1) MicroTileRest(t1 - i, tokens + i * n + k0 * tile, panel, kc, y + i * ldy + r0, ldy, cols, accumulate);
      }
    }
  }
}

void GemmPacked(const float* tokens, int64_t m, const float* packed, int64_t rows, int64_t n, float* y,
                int64_t ldy) {
  GemmPackedOf(tokens, m, packed, rows, n, y, ldy);
}

void GemmPackedF16(const float* tokens, int64_t m, const uint16_t* packed, int64_t rows, int64_t n, float* y,
                   int64_t ldy) {
  GemmPackedOf(tokens, m, reinterpret_cast<const hwy::float16_t*>(packed), rows, n, y, ldy);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(PanelRows);
HWY_EXPORT(PackRows);
HWY_EXPORT(PackRowsF16);
HWY_EXPORT(GemmPacked);
HWY_EXPORT(GemmPackedF16);
HWY_EXPORT(PanelTokens);
HWY_EXPORT(PackTokens);
}  // namespace

int64_t gemm_panel_rows() { return HWY_DYNAMIC_DISPATCH(PanelRows)(); }

int64_t gemm_panel_tokens() { return HWY_DYNAMIC_DISPATCH(PanelTokens)(); }

size_t gemm_packed_tokens_floats(int64_t m, int64_t n) {
  return static_cast<size_t>((m + kGemmMaxPanelTokens - 1) / kGemmMaxPanelTokens * kGemmMaxPanelTokens * n);
}

void gemm_pack_tokens(const float* x, int64_t ldx, int64_t n, int64_t m, int64_t first_panel, int64_t panels,
                      float* out) {
  HWY_DYNAMIC_DISPATCH(PackTokens)(x, ldx, n, m, first_panel, panels, out);
}

size_t gemm_packed_floats(int64_t rows, int64_t n) {
  return static_cast<size_t>((rows + kGemmMaxPanelRows - 1) / kGemmMaxPanelRows * kGemmMaxPanelRows * n);
}

void gemm_pack_rows(const float* w, int64_t ldw, int64_t rows, int64_t n, float* packed) {
  HWY_DYNAMIC_DISPATCH(PackRows)(w, ldw, rows, n, packed);
}

void gemm_pack_rows_f16(const uint16_t* w, int64_t ldw, int64_t rows, int64_t n, uint16_t* packed) {
  HWY_DYNAMIC_DISPATCH(PackRowsF16)(w, ldw, rows, n, packed);
}

void gemm_f32_packed(const float* tokens, int64_t m, const float* packed, int64_t rows, int64_t n, float* y,
                     int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(GemmPacked)(tokens, m, packed, rows, n, y, ldy);
}

void gemm_f16_packed(const float* tokens, int64_t m, const uint16_t* packed, int64_t rows, int64_t n, float* y,
                     int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(GemmPackedF16)(tokens, m, packed, rows, n, y, ldy);
}
}  // namespace deferkv
#endif
