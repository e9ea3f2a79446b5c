// gemm_int16 (gemm_int16.h): quantised weights times quantised activations in int16, summed
// exactly in int32 per block.
//
// The micro-kernel keeps R weight rows x T tokens of int32 sums in registers: for each pair
// of values k, k + 1 it loads the pair of every token of a panel (two vectors) and, for
// each of the R rows, broadcasts the row's pair and multiply-adds it against them
// (vpmaddwd, or AVX-512 VNNI's vpdpwssd, which also adds). Each (row, token) has an int32
// sum per block that is exact (the ranges in packed_activation.h keep it below 2^31);
// at the block's end it is scaled by the row's and the token's block scales into a
// float32 sum, less the row's min term where the type has one. Float32 sums see the
// blocks in order, whatever m, R or the split of rows.
//
// The weights are decoded a tile of rows at a time (int16_rows.h) into the calling
// thread's scratch; every panel of tokens then runs against the tile while it is in L2.
//
// Built for AVX2, AVX-512 and AVX-512 with VNNI (Highway's AVX3_DL, enabled for this file
// only: hwy_targets.h leaves it out of the other kernels, which gain nothing from it).
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_int16.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "deferkv/error.h"
#include "kernels/gemm_int16.h"
#include "kernels/int16_rows.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"

#ifndef DEFERKV_GEMM_INT16_SHARED
#define DEFERKV_GEMM_INT16_SHARED
namespace deferkv {
namespace {

size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Byte offsets of a token panel's arrays, and its size:
//   q: int32 [n / 2][T], the pair of values 2p, 2p + 1 of token t at [p][t];
//   d: float [nb][T], the tokens' block scales;
//   sums: int32 [nb * 4][T] (256-blocks), pairs of the tokens' 32-value sums.
struct PanelLayout {
  size_t d, sums, bytes;
};

PanelLayout panel_layout(int64_t n, int block, int64_t tokens) {
  const auto t = static_cast<size_t>(tokens);
  const auto nb = static_cast<size_t>(n / block);
  PanelLayout layout;
  layout.d = round_up(static_cast<size_t>(n) / 2 * t * sizeof(int32_t));
  layout.sums = layout.d + round_up(nb * t * sizeof(float));
  layout.bytes = layout.sums + (block == kQK ? round_up(nb * 4 * t * sizeof(int32_t)) : 0);
  return layout;
}

// Weight rows decoded at a time: about 128 KiB of int16 values, a multiple of every
// target's rows per micro-kernel (6 and 12).
constexpr int64_t kRowMultiple = 12;
int64_t tile_rows(int64_t n) {
  return std::max<int64_t>(kRowMultiple, (128 << 10) / 2 / n / kRowMultiple * kRowMultiple);
}

// Bytes of the token panels' values that every row of a tile runs against before the next
// values: they stay in L2 (1-2 MiB on the CPUs this runs on).
constexpr int64_t kTokenChunkBytes = 1 << 20;

int32_t load_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  return pair;
}

}  // namespace
}  // namespace deferkv
#endif

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

// x86 only: elsewhere ReorderWidenMulAccumulate also adds into its second sum, which
// DotPairs leaves out, and no such CPU has been tested.
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128

using D32 = hn::ScalableTag<int32_t>;
using D16 = hn::Repartition<int16_t, D32>;
using DF = hn::Repartition<float, D32>;
using V32 = hn::Vec<D32>;

// Rows per micro-kernel: R x 2 int32 accumulators, two token vectors and a broadcast pair
// fit the register file (32 vectors with AVX-512, 16 with AVX2); the float sums wait in L1.
// With AVX-512, 12 rows ran pp512 of the 500M Q4_K model 8-21% faster than 6 rows with
// the float sums in registers too, and 4 rows slower again (bench/README.md).
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kTileR = 12;
#else
constexpr size_t kTileR = 6;
#endif
static_assert(kRowMultiple % kTileR == 0);
constexpr int64_t kRunPairs = Int16Rows::kRunValues / 2;

// sum + the products of a's and b's int16 lanes, pairwise added into int32 lanes.
HWY_INLINE V32 DotPairs(V32 a, V32 b, V32 sum) {
#if HWY_TARGET == HWY_AVX3_DL
  // Highway 1.0 has no VNNI op and does not compile this target with avx512vnni, which
  // AVX3_DL's run-time check does require; so the instruction is written out. (Its
  // intrinsic, with the option added by pragma, made GCC spill the accumulators.)
  __m512i raw = sum.raw;
  asm("vpdpwssd %[b], %[a], %[sum]" : [sum] "+v"(raw) : [a] "v"(a.raw), [b] "v"(b.raw));
  return V32{raw};
#else
  const D32 d32;
  const D16 d16;
  V32 unused = hn::Zero(d32);  // x86's int16 ReorderWidenMulAccumulate adds into sum only
  return hn::ReorderWidenMulAccumulate(d32, hn::BitCast(d16, a), hn::BitCast(d16, b), sum, unused);
#endif
}

int64_t PanelTokens() { return 2 * static_cast<int64_t>(hn::Lanes(D32())); }

// out[j * T + t] = row r + j's dot product with token t of the panel over blocks
// [b0, b1), for j < R, added to what out holds if `accumulate`.
template <size_t R, bool kMins>
HWY_INLINE void MicroTile(const Int16Rows& w, int64_t r, const uint8_t* panel,
                          const PanelLayout& layout, int64_t b0, int64_t b1, bool accumulate, float* out) {
  const D32 d32;
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(d32));
  const int64_t T = 2 * L, n = w.n, block = w.block, nb = n / block;
  const auto* xq = reinterpret_cast<const int32_t*>(panel);
  const auto* xd = reinterpret_cast<const float*>(panel + layout.d);
  const auto* xs = reinterpret_cast<const int32_t*>(panel + layout.sums);
  // The float sums live in `out` (L1) between blocks, leaving the registers to the int32 ones.
  if (!accumulate) {
    for (int64_t i = 0; i < static_cast<int64_t>(R) * T; i += L) hn::StoreU(hn::Zero(df), df, out + i);
  }
  for (int64_t b = b0; b < b1; ++b) {
    V32 acc[R][2];
    Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA { acc[j][0] = acc[j][1] = hn::Zero(d32); });
    // A run of kRunValues values of the group's rows at a time: pair p of row r + j lies
    // at run[j * kRunPairs + p].
    for (int64_t k0 = b * block; k0 < (b + 1) * block; k0 += Int16Rows::kRunValues) {
      const auto* run = reinterpret_cast<const int32_t*>(w.at(r, k0));
      const int32_t* x = xq + k0 / 2 * T;
      for (int64_t p = 0; p < kRunPairs; ++p) {
        const V32 x0 = hn::LoadU(d32, x + p * T);
        const V32 x1 = hn::LoadU(d32, x + p * T + L);
        Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
          const V32 pair = hn::Set(d32, run[static_cast<int64_t>(j) * kRunPairs + p]);
          acc[j][0] = DotPairs(x0, pair, acc[j][0]);
          acc[j][1] = DotPairs(x1, pair, acc[j][1]);
        });
      }
    }
    const auto dx0 = hn::LoadU(df, xd + b * T);
    const auto dx1 = hn::LoadU(df, xd + b * T + L);
    Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
      const auto scale = hn::Set(df, w.scale[(r + j) * nb + b]);
      float* o = out + j * T;
      hn::StoreU(hn::MulAdd(hn::ConvertTo(df, acc[j][0]), hn::Mul(scale, dx0), hn::LoadU(df, o)), df, o);
      hn::StoreU(hn::MulAdd(hn::ConvertTo(df, acc[j][1]), hn::Mul(scale, dx1), hn::LoadU(df, o + L)), df, o + L);
    });
    if constexpr (kMins) {
      // - min_scale * sum_s mins[s] * (the token's sum over sub-block s), times the token's d.
      Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
        const int16_t* mins = w.mins + ((r + j) * nb + b) * 8;
        V32 m0 = hn::Zero(d32), m1 = hn::Zero(d32);
        for (int64_t s = 0; s < 4; ++s) {
          const V32 pair = hn::Set(d32, load_pair(mins + 2 * s));
          m0 = DotPairs(hn::LoadU(d32, xs + (b * 4 + s) * T), pair, m0);
          m1 = DotPairs(hn::LoadU(d32, xs + (b * 4 + s) * T + L), pair, m1);
        }
        const auto min_scale = hn::Set(df, w.min_scale[(r + j) * nb + b]);
        float* o = out + j * T;
        hn::StoreU(hn::NegMulAdd(hn::ConvertTo(df, m0), hn::Mul(min_scale, dx0), hn::LoadU(df, o)), df, o);
        hn::StoreU(hn::NegMulAdd(hn::ConvertTo(df, m1), hn::Mul(min_scale, dx1), hn::LoadU(df, o + L)), df, o + L);
      });
    }
  }
}

// MicroTile for `rows` <= kTileR rows: one instantiation per count.
template <bool kMins>
HWY_INLINE void MicroTileRows(int64_t rows, const Int16Rows& w, int64_t r, const uint8_t* panel, const PanelLayout& layout, int64_t b0, int64_t b1,
                              bool accumulate, float* out) {
  Unroll<kTileR + 1>([&](auto count) DEFERKV_INLINE_LAMBDA {
    if constexpr (count != 0) {
      if (rows == static_cast<int64_t>(count)) {
        MicroTile<count, kMins>(w, r, panel, layout, b0, b1, accumulate, out);
      }
    }
  });
}

// The tile's rows against every panel, a chunk of values at a time: the chunk of all the
// panels, read once per micro-kernel of rows, stays in L2 (kTokenChunkBytes) instead of
// streaming from L3 when m x n is large. The float sums of a chunk continue those of the
// chunks before it (through y, exactly), so chunking does not change a result.
template <bool kMins>
void RunTile(const Int16Rows& w, int64_t count, const uint8_t* tokens,
             const PanelLayout& layout, int64_t m, float* y, int64_t ldy) {
  const int64_t T = PanelTokens(), panels = (m + T - 1) / T, block = w.block, nb = w.n / block;
  const int64_t chunk_blocks = std::max<int64_t>(1, kTokenChunkBytes / (panels * T * 2 * block));
  HWY_ALIGN float out[kTileR * 2 * HWY_MAX_BYTES / sizeof(int32_t)];
  for (int64_t b0 = 0; b0 < nb; b0 += chunk_blocks) {
    const int64_t b1 = std::min(nb, b0 + chunk_blocks);
    const bool accumulate = b0 > 0;
    for (int64_t p = 0; p < panels; ++p) {
      const uint8_t* panel = tokens + static_cast<size_t>(p) * layout.bytes;
      const int64_t valid = std::min(T, m - p * T);
      for (int64_t j0 = 0; j0 < count; j0 += static_cast<int64_t>(kTileR)) {
        const int64_t rows = std::min(static_cast<int64_t>(kTileR), count - j0);
        if (accumulate) {
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t j = 0; j < rows; ++j) out[j * T + t] = t < valid ? y[(p * T + t) * ldy + j0 + j] : 0.0f;
          }
        }
        MicroTileRows<kMins>(rows, w, j0, panel, layout, b0, b1, accumulate, out);
        for (int64_t t = 0; t < valid; ++t) {
          float* yt = y + (p * T + t) * ldy + j0;
          for (int64_t j = 0; j < rows; ++j) yt[j] = out[j * T + t];
        }
      }
    }
  }
}

void GemmInt16(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
               const void* tokens, int64_t m, float* y, int64_t ldy, void* scratch) {
  const auto block = static_cast<int>(dtype_block_elems(weight_type));
  const PanelLayout layout = panel_layout(n, block, PanelTokens());
  const int64_t tile = tile_rows(n);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* panels = static_cast<const uint8_t*>(tokens);
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    const Int16Rows decoded = int16_rows_in(scratch, weight_type, count, n, static_cast<int64_t>(kTileR));
    decode_int16_rows(weight_type, w + r0 * row_stride, row_stride, count, decoded);
    if (decoded.mins != nullptr) {
      RunTile<true>(decoded, count, panels, layout, m, y + r0, ldy);
    } else {
      RunTile<false>(decoded, count, panels, layout, m, y + r0, ldy);
    }
  }
}

bool Supported() { return true; }

#else  // other CPUs: matmul's float path serves the quantised types.

int64_t PanelTokens() { return 2; }
void GemmInt16(DType, const void*, size_t, int64_t, int64_t, const void*, int64_t, float*, int64_t, void*) {
  fail("gemm_int16: needs AVX2 or AVX-512 (check gemm_int16_serves first)");
}
bool Supported() { return false; }

#endif

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(PanelTokens);
HWY_EXPORT(GemmInt16);
HWY_EXPORT(Supported);

// Fewer tokens than this take matmul's matvec path instead. A panel costs as much for one
// token as for T (32 with AVX-512): at 16 tokens the two paths took the same time, at 32
// the GEMM half (kernels_bench's gemm_int16 against matmul_small_m, 4096 x 4096, Q4_K).
constexpr int64_t kMinTokens = 16;

}  // namespace

bool gemm_int16_serves(DType weight_type, int64_t m) {
  return m >= kMinTokens && has_int16_rows(weight_type) && HWY_DYNAMIC_DISPATCH(Supported)();
}

int64_t gemm_int16_panel_tokens() { return HWY_DYNAMIC_DISPATCH(PanelTokens)(); }

size_t gemm_int16_tokens_bytes(DType weight_type, int64_t n, int64_t m) {
  const int64_t t = gemm_int16_panel_tokens();
  const int block = static_cast<int>(dtype_block_elems(weight_type));
  return static_cast<size_t>((m + t - 1) / t) * panel_layout(n, block, t).bytes;
}

void gemm_int16_pack_tokens(DType weight_type, const float* x, int64_t ldx, int64_t n, int64_t m,
                            int64_t first_panel, int64_t panels, void* out) {
  const int64_t T = gemm_int16_panel_tokens();
  const int block = static_cast<int>(dtype_block_elems(weight_type));
  const PanelLayout layout = panel_layout(n, block, T);
  const int64_t nb = n / block;
  std::vector<unsigned char> packed(packed_layout(n, block).total);
  for (int64_t p = first_panel; p < first_panel + panels; ++p) {
    auto* panel = static_cast<unsigned char*>(out) + static_cast<size_t>(p) * layout.bytes;
    if ((p + 1) * T > m) std::memset(panel, 0, layout.bytes);
    auto* q = reinterpret_cast<int32_t*>(panel);
    auto* d = reinterpret_cast<float*>(panel + layout.d);
    auto* sums = reinterpret_cast<int32_t*>(panel + layout.sums);
    for (int64_t t = 0; t < T && p * T + t < m; ++t) {
      pack_int16_blocks(x + (p * T + t) * ldx, n, block, packed.data());
      const PackedActivation token = packed_view(packed.data(), n, block);
      for (int64_t k = 0; k < n; k += 2) q[k / 2 * T + t] = load_pair(token.q + k);
      for (int64_t b = 0; b < nb; ++b) d[b * T + t] = token.d[b];
      if (block == kQK) {
        for (int64_t s = 0; s < nb * 8; s += 2) sums[s / 2 * T + t] = load_pair(token.sums + s);
      }
    }
  }
}

size_t gemm_int16_scratch_bytes(DType weight_type, int64_t n) {
  // A tile is a multiple of every target's kTileR rows, so its groups are whole.
  return has_int16_rows(weight_type) ? int16_rows_bytes(weight_type, tile_rows(n), n, 1) : 0;
}

void gemm_int16(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
                const void* tokens, int64_t m, float* y, int64_t ldy, void* scratch) {
  HWY_DYNAMIC_DISPATCH(GemmInt16)(weight_type, weights, row_stride, n, rows, tokens, m, y, ldy, scratch);
}
}  // namespace deferkv
#endif
