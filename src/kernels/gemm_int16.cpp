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
// Two other forms share the tiles, panels and loops:
//  - int8 (AVX2; the K-quants and Q4_0, gemm_int16_takes_int8): the weights decoded to
//    bytes (Int8Rows) against int8 tokens, MicroTileInt8;
//  - bf16 (AVX-512 with the BF16 extension; BF16 weights): the rows copied as they are into
//    the int16 layout, bf16 token pairs, MicroTile summing in float32 with vdpbf16ps.
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
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/setting.h"
#include "deferkv/error.h"
#include "kernels/gemm_int16.h"
#include "kernels/int16_rows.h"
#include "kernels/k4_values-inl.h"
#include "kernels/kernel_helpers-inl.h"
#include "kernels/matvec.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/q6_k_values-inl.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

#ifndef DEFERKV_GEMM_INT16_SHARED
#define DEFERKV_GEMM_INT16_SHARED
namespace deferkv {
namespace {

size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Byte offsets of a token panel's arrays, and its size:
//   q: int32 [n / 2][T], the pair of values 2p, 2p + 1 of token t at [p][t] (int16 tokens),
//      or int32 [n / 4][T], values 4p .. 4p + 3 of token t at [p][t] (int8 tokens);
//   d: float [nb][T], the tokens' block scales;
//   sums: int32 [nb * 4][T] (256-blocks), pairs of the tokens' 32-value sums; or
//      int32 [nb * 8][T], pairs of their 16-value sums (Q6_K's int8 tokens).
struct PanelLayout {
  size_t d, sums, bytes;
};

// How gemm_int16 takes the tokens for a type on a target (gemm_int16_takes_int8, BF16).
enum class TokenForm {
  kInt16,         // int16 pairs, the block's d, pairs of 32-value sums (256-blocks)
  kInt8,          // int8 fours, the 256-block's d, pairs of 32-value sums (Q4_K, Q5_K)
  kInt8Sums16,    // the same with pairs of 16-value sums (Q6_K)
  kInt8Offsets,   // int8 fours in blocks of 32 (Q4_0), one int32 a block: 8 times its sum,
                  // as Q4_0 stores q + 8
  kBf16,          // bf16 pairs and nothing else (BF16 weights)
};

TokenForm token_form(DType weight_type, bool int8) {
  if (weight_type == DType::BF16) return TokenForm::kBf16;
  if (!int8) return TokenForm::kInt16;
  if (weight_type == DType::Q6_K) return TokenForm::kInt8Sums16;
  return weight_type == DType::Q4_0 ? TokenForm::kInt8Offsets : TokenForm::kInt8;
}

bool has_int8_values(TokenForm form) { return form != TokenForm::kInt16 && form != TokenForm::kBf16; }

// int32s of the panel's sums a block and token.
size_t sums_per_block(TokenForm form, int block) {
  switch (form) {
    case TokenForm::kInt8Offsets: return 1;
    case TokenForm::kInt8Sums16: return 8;
    case TokenForm::kBf16: return 0;
    case TokenForm::kInt16:
    case TokenForm::kInt8: return block == kQK ? 4 : 0;
  }
  return 0;
}

PanelLayout panel_layout(int64_t n, int block, int64_t tokens, TokenForm form) {
  const auto t = static_cast<size_t>(tokens);
  if (form == TokenForm::kBf16) {
    const size_t values = round_up(static_cast<size_t>(n) * 2 * t);
    return {values, values, values};
  }
  const auto nb = static_cast<size_t>(n / block);
  const size_t sum_pairs = sums_per_block(form, block);
  PanelLayout layout;
  layout.d = round_up(static_cast<size_t>(n) * (has_int8_values(form) ? 1 : 2) * t);
  layout.sums = layout.d + round_up(nb * t * sizeof(float));
  layout.bytes = layout.sums + round_up(nb * sum_pairs * t * sizeof(int32_t));
  return layout;
}

// BF16 weights (AVX-512 BF16, gemm_int16.h) sum their products in float32 a block of
// values at a time, each block's sum then added in order: the largest of 256, 128, 64 and 32
// that divides a row, so that a result depends on n alone, never on m or chunking. Only the
// AVX-512 targets call it, so other CPUs' builds (aarch64) have no caller.
[[maybe_unused]] int bf16_block(int64_t n) {
  for (int block : {256, 128, 64}) {
    if (n % block == 0) return block;
  }
  return 32;
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

int32_t load_four(const void* p) {
  int32_t four;
  std::memcpy(&four, p, sizeof(four));
  return four;
}

// The byte form of a tile of Q4_K/Q5_K/Q6_K/Q4_0 rows, for the int8 micro-kernel (AVX2):
// value k of row r is the byte at(r, k)[0] times its sub-block's integer scale
// sc[r * n / sub + k / sub] and the block's scale[r * nb + b], less min_scale[r * nb + b]
// times mins[(r * nb + b) * block / sub + (k % block) / sub]. The sub-block scale stays
// apart so that the value fits a byte:
//  - Q4_K, Q5_K (sub 32): the nibble (Q5_K's fifth bit merged in), the six-bit scale and
//    min, d and dmin, as in Int16Rows;
//  - Q6_K (sub 16): the six-bit value q + 32 >= 0 and the int8 scale, d; the min term
//    takes the offset back off (mins = 32 * scale, min_scale = d);
//  - Q4_0 (block 32): the nibble q + 8 and d; no sub-block scale or mins (the micro-kernel
//    takes the offset off with the tokens' sums, TokenForm::kInt8Offsets).
// Rows in groups of kInt8GroupRows, each run of 32 values of a group's rows side by side.
constexpr int64_t kInt8GroupRows = 3;
static_assert(kRowMultiple % kInt8GroupRows == 0);

struct Int8Rows {
  int64_t n = 0;
  int64_t sub = 32;            // values per sub-block scale: 32, or 16 (Q6_K)
  uint8_t* q = nullptr;        // [count rounded up to the group][n]
  int16_t* sc = nullptr;       // [count][n / sub]
  float* scale = nullptr;      // [count][nb]
  int16_t* mins = nullptr;     // [count][nb][256 / sub]
  float* min_scale = nullptr;  // [count][nb]

  uint8_t* at(int64_t r, int64_t k) const {
    const int64_t group = r / kInt8GroupRows, j = r % kInt8GroupRows;
    return q + (group * n + k / 32 * 32) * kInt8GroupRows + j * 32 + k % 32;
  }
};

// Int8Rows of `count` rows in `scratch` (bytes != nullptr: only the size).
Int8Rows int8_rows_in(void* scratch, int64_t count, int64_t n, int64_t sub, int64_t block,
                      size_t* bytes = nullptr) {
  const auto values = static_cast<size_t>((count + kInt8GroupRows - 1) / kInt8GroupRows * kInt8GroupRows * n);
  const auto blocks = static_cast<size_t>(count * (n / block));
  auto* at = static_cast<unsigned char*>(scratch);
  size_t used = 0;
  const auto take = [&](size_t size) {
    unsigned char* start = at == nullptr ? nullptr : at + used;
    used += round_up(size);
    return start;
  };
  Int8Rows rows;
  rows.n = n;
  rows.sub = sub;
  rows.q = take(values);
  rows.sc = reinterpret_cast<int16_t*>(take(static_cast<size_t>(count * (n / sub)) * sizeof(int16_t)));
  rows.scale = reinterpret_cast<float*>(take(blocks * sizeof(float)));
  rows.mins = reinterpret_cast<int16_t*>(take(blocks * static_cast<size_t>(block / sub) * sizeof(int16_t)));
  rows.min_scale = reinterpret_cast<float*>(take(blocks * sizeof(float)));
  if (bytes != nullptr) *bytes = used;
  return rows;
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

#if HWY_TARGET <= HWY_AVX3
// sum + the products of a's and b's bf16 lanes, pairwise added into float32 lanes: AVX-512
// BF16's vdpbf16ps, 32 multiply-adds an instruction against FMA's 16. Only run where the
// CPU has it (gemm_int16_serves); written out as DotPairs' VNNI is, for the same reason.
HWY_INLINE hn::Vec<DF> DotPairs(V32 a, V32 b, hn::Vec<DF> sum) {
  __m512 raw = sum.raw;
  asm("vdpbf16ps %[b], %[a], %[sum]" : [sum] "+v"(raw) : [a] "v"(a.raw), [b] "v"(b.raw));
  return hn::Vec<DF>{raw};
}
#endif

int64_t PanelTokens() { return 2 * static_cast<int64_t>(hn::Lanes(D32())); }

// The float sums of R rows x the panel's T tokens at the end of block b: out[j * T + t] +=
// acc[j] * (row r + j's block scale) * (token t's), less the row's min term where the type
// has one: kMinPairs pairs of mins a block against as many pairs of the panel's sums (0:
// none). Rows: Int16Rows or Int8Rows, which keep these arrays alike.
template <size_t R, int kMinPairs, class Rows>
HWY_INLINE void EndBlock(const V32 (&acc)[R][2], const Rows& w, int64_t r, int64_t b, int64_t nb,
                         const float* xd, const int32_t* xs, float* out) {
  const D32 d32;
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(d32));
  const int64_t T = 2 * L;
  const auto dx0 = hn::LoadU(df, xd + b * T);
  const auto dx1 = hn::LoadU(df, xd + b * T + L);
  Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
    const auto scale = hn::Set(df, w.scale[(r + j) * nb + b]);
    float* o = out + j * T;
    hn::StoreU(hn::MulAdd(hn::ConvertTo(df, acc[j][0]), hn::Mul(scale, dx0), hn::LoadU(df, o)), df, o);
    hn::StoreU(hn::MulAdd(hn::ConvertTo(df, acc[j][1]), hn::Mul(scale, dx1), hn::LoadU(df, o + L)), df, o + L);
  });
  if constexpr (kMinPairs > 0) {
    // - min_scale * sum_s mins[s] * (the token's sum over sub-block s), times the token's d.
    Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
      const int16_t* mins = w.mins + ((r + j) * nb + b) * 2 * kMinPairs;
      V32 m0 = hn::Zero(d32), m1 = hn::Zero(d32);
      for (int64_t s = 0; s < kMinPairs; ++s) {
        const V32 pair = hn::Set(d32, load_pair(mins + 2 * s));
        m0 = DotPairs(hn::LoadU(d32, xs + (b * kMinPairs + s) * T), pair, m0);
        m1 = DotPairs(hn::LoadU(d32, xs + (b * kMinPairs + s) * T + L), pair, m1);
      }
      const auto min_scale = hn::Set(df, w.min_scale[(r + j) * nb + b]);
      float* o = out + j * T;
      hn::StoreU(hn::NegMulAdd(hn::ConvertTo(df, m0), hn::Mul(min_scale, dx0), hn::LoadU(df, o)), df, o);
      hn::StoreU(hn::NegMulAdd(hn::ConvertTo(df, m1), hn::Mul(min_scale, dx1), hn::LoadU(df, o + L)), df, o + L);
    });
  }
}

// out[j * T + t] = row r + j's dot product with token t of the panel over blocks
// [b0, b1), for j < R, added to what out holds if `accumulate`. kBf16: the rows and tokens
// are bf16 pairs, summed in float32 (a block's sum added to out as it is).
template <size_t R, bool kMins, bool kBf16 = false>
HWY_INLINE void MicroTile(const Int16Rows& w, int64_t r, const uint8_t* panel,
                          const PanelLayout& layout, int64_t b0, int64_t b1, bool accumulate, float* out) {
  using Acc = std::conditional_t<kBf16, hn::Vec<DF>, V32>;
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
    const Acc zero = [&] {
      if constexpr (kBf16) {
        return hn::Zero(df);
      } else {
        return hn::Zero(d32);
      }
    }();
    Acc acc[R][2];
    Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA { acc[j][0] = acc[j][1] = zero; });
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
    if constexpr (kBf16) {
      Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
        float* o = out + j * T;
        hn::StoreU(hn::Add(hn::LoadU(df, o), acc[j][0]), df, o);
        hn::StoreU(hn::Add(hn::LoadU(df, o + L), acc[j][1]), df, o + L);
      });
    } else {
      EndBlock<R, kMins ? 4 : 0>(acc, w, r, b, nb, xd, xs, out);
    }
  }
}

#if HWY_TARGET == HWY_AVX2
// The int8 micro-kernel (AVX2; Q4_K, Q5_K, Q6_K): the weights stay bytes (Int8Rows) and
// meet int8 tokens in vpmaddubsw, 32 multiply-adds an instruction against vpmaddwd's 16
// (AVX2 has no VNNI to fold the add into either). Each int16 lane then holds two
// products; kSteps groups of four values are summed in int16 before vpmaddwd applies the
// sub-block's scale and widens to int32. No int16 sum saturates: 2 * kSteps * (the
// largest byte) * 127 is 30480 for Q4_K at 8 steps (a whole sub-block), 31496 for Q5_K
// at 4 and 32004 for Q6_K at 2 (its sub-blocks are 4 steps). R rows x 2 token vectors of
// int32 and of int16 sums, two token vectors and a broadcast fit AVX2's 16 registers at
// R = 3. kSub: values per sub-block scale; kMinPairs as EndBlock's.
constexpr size_t kTileR8 = static_cast<size_t>(kInt8GroupRows);
static_assert(kTileR8 <= kTileR, "RunTile's float sums are sized for kTileR rows");

template <size_t R, int kSteps, int kSub, int kMinPairs, int kBlock = kQK>
HWY_INLINE void MicroTileInt8(const Int8Rows& w, int64_t r, const uint8_t* panel, const PanelLayout& layout,
                              int64_t b0, int64_t b1, bool accumulate, float* out) {
  static_assert(8 % kSteps == 0 && kSub % (4 * kSteps) == 0, "a sub-block is whole groups of kSteps");
  // Q4_0 (kBlock 32): no sub-block scale, and 8 times the block's token values taken off.
  constexpr bool kQ4_0 = kBlock == kQ32;
  constexpr int64_t L = 8, T = 2 * L;
  const int64_t nb = w.n / kBlock, subs = w.n / kSub;
  const auto* xq = reinterpret_cast<const int32_t*>(panel);
  const auto* xd = reinterpret_cast<const float*>(panel + layout.d);
  const auto* xs = reinterpret_cast<const int32_t*>(panel + layout.sums);
  const __m256i ones = _mm256_set1_epi16(1);
  if (!accumulate) {
    for (int64_t i = 0; i < static_cast<int64_t>(R) * T; i += L) _mm256_storeu_ps(out + i, _mm256_setzero_ps());
  }
  for (int64_t b = b0; b < b1; ++b) {
    V32 acc[R][2];
    Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA { acc[j][0] = acc[j][1] = V32{_mm256_setzero_si256()}; });
    for (int64_t s = 0; s < kBlock / 32; ++s) {
      const int64_t k0 = b * kBlock + 32 * s;
      const uint8_t* run = w.at(r, k0);  // row r + j's 32 values at run + 32 * j
      const int32_t* x = xq + k0 / 4 * T;
      for (int h = 0; h < 8; h += kSteps) {
        __m256i part[R][2];
        Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA { part[j][0] = part[j][1] = _mm256_setzero_si256(); });
        Unroll<kSteps>([&](auto step) DEFERKV_INLINE_LAMBDA {
          const int64_t p = h + static_cast<int64_t>(step);
          const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + p * T));
          const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + p * T + L));
          Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
            const __m256i four = _mm256_set1_epi32(load_four(run + 32 * j + 4 * p));
            part[j][0] = _mm256_add_epi16(part[j][0], _mm256_maddubs_epi16(four, x0));
            part[j][1] = _mm256_add_epi16(part[j][1], _mm256_maddubs_epi16(four, x1));
          });
        });
        Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
          const __m256i sc = kQ4_0 ? ones : _mm256_set1_epi16(w.sc[(r + j) * subs + (k0 + 4 * h) / kSub]);
          acc[j][0] = V32{_mm256_add_epi32(acc[j][0].raw, _mm256_madd_epi16(part[j][0], sc))};
          acc[j][1] = V32{_mm256_add_epi32(acc[j][1].raw, _mm256_madd_epi16(part[j][1], sc))};
        });
      }
    }
    if constexpr (kQ4_0) {
      const __m256i offset0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + b * T));
      const __m256i offset1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + b * T + L));
      Unroll<R>([&](auto j) DEFERKV_INLINE_LAMBDA {
        acc[j][0] = V32{_mm256_sub_epi32(acc[j][0].raw, offset0)};
        acc[j][1] = V32{_mm256_sub_epi32(acc[j][1].raw, offset1)};
      });
    }
    EndBlock<R, kMinPairs>(acc, w, r, b, nb, xd, xs, out);
  }
}

// Q4_K/Q5_K rows into Int8Rows: the value bytes as matvec_k4_int8.cpp takes them (K4Bytes).
template <class Block>
void DecodeK4Bytes(const void* rows, size_t row_stride, int64_t count, const Int8Rows& out) {
  const int64_t nb = out.n / kQK, subs = out.n / 32;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const Block& block = blocks[b];
      const ScalesK4 s = unpack_scales_k4(block.scales);
      const int64_t at = r * nb + b;
      out.scale[at] = fp16_to_fp32(block.d);
      out.min_scale[at] = fp16_to_fp32(block.dmin);
      for (int j = 0; j < 8; ++j) {
        out.mins[at * 8 + j] = s.m[j];
        out.sc[r * subs + b * 8 + j] = s.sc[j];
      }
      for (int c = 0; c < 4; ++c) {
        __m256i lo, hi;
        K4Bytes(block, c, lo, hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.at(r, b * kQK + 64 * c)), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.at(r, b * kQK + 64 * c + 32)), hi);
      }
    }
  }
}

// Q6_K rows into Int8Rows: the six-bit values as q6_k_values-inl.h assembles them (Q6GroupBytes).
void DecodeQ6KBytes(const void* rows, size_t row_stride, int64_t count, const Int8Rows& out) {
  const int64_t nb = out.n / kQK, subs = out.n / 16;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ6_K*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K& block = blocks[b];
      const int64_t at = r * nb + b;
      out.scale[at] = out.min_scale[at] = fp16_to_fp32(block.d);
      for (int i = 0; i < 16; ++i) {
        const auto scale = static_cast<int8_t>(block.scales[i]);
        out.sc[r * subs + b * 16 + i] = scale;
        out.mins[at * 16 + i] = static_cast<int16_t>(32 * scale);
      }
      for (int half = 0; half < 2; ++half) {
        const auto* ql = reinterpret_cast<const __m256i*>(block.ql + 64 * half);
        const __m256i a = _mm256_loadu_si256(ql), c = _mm256_loadu_si256(ql + 1);
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half));
        for (int g = 0; g < 4; ++g) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.at(r, b * kQK + 128 * half + 32 * g)),
                              Q6GroupBytes(g % 2 == 0 ? a : c, h, g));
        }
      }
    }
  }
}

// Q4_0 rows into Int8Rows: the nibbles, values 0-15 of a block then 16-31.
void DecodeQ40Bytes(const void* rows, size_t row_stride, int64_t count, const Int8Rows& out) {
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const int64_t nb = out.n / kQ32;
  for (int64_t r = 0; r < count; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(static_cast<const uint8_t*>(rows) + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      out.scale[r * nb + b] = fp16_to_fp32(blocks[b].d);
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
      uint8_t* run = out.at(r, b * kQ32);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(run), _mm_and_si128(q, low4));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(run + 16), _mm_and_si128(_mm_srli_epi16(q, 4), low4));
    }
  }
}

bool Int8Kernel(DType weight_type) {
  return weight_type == DType::Q4_K || weight_type == DType::Q5_K || weight_type == DType::Q6_K ||
         weight_type == DType::Q4_0;
}
#else
bool Int8Kernel(DType) { return false; }
#endif

// Calls micro(std::integral_constant<size_t, count>{}) for rows == count <= kRows: one
// instantiation of a micro-kernel per row count.
template <size_t kRows, class Micro>
HWY_INLINE void ForRowCount(int64_t rows, const Micro& micro) {
  Unroll<kRows + 1>([&](auto count) DEFERKV_INLINE_LAMBDA {
    if constexpr (count != 0) {
      if (rows == static_cast<int64_t>(count)) micro(count);
    }
  });
}

// The tile's rows against every panel, a chunk of values at a time: the chunk of all the
// panels, read once per micro-kernel of rows, stays in L2 (kTokenChunkBytes) instead of
// streaming from L3 when m x n is large. The float sums of a chunk continue those of the
// chunks before it (through y, exactly), so chunking does not change a result.
// micro(rows, j0, panel, b0, b1, accumulate, out) runs a micro-kernel of rows <= kRows
// rows from tile row j0 over blocks [b0, b1).
template <size_t kRows, class Micro>
void RunTile(int64_t n, int block, int64_t value_bytes, int64_t count, const uint8_t* tokens,
             const PanelLayout& layout, int64_t m, float* y, int64_t ldy, const Micro& micro) {
  const int64_t T = PanelTokens(), panels = (m + T - 1) / T, nb = n / block;
  const int64_t chunk_blocks = std::max<int64_t>(1, kTokenChunkBytes / (panels * T * value_bytes * block));
  HWY_ALIGN float out[kTileR * 2 * HWY_MAX_BYTES / sizeof(int32_t)];
  for (int64_t b0 = 0; b0 < nb; b0 += chunk_blocks) {
    const int64_t b1 = std::min(nb, b0 + chunk_blocks);
    const bool accumulate = b0 > 0;
    for (int64_t p = 0; p < panels; ++p) {
      const uint8_t* panel = tokens + static_cast<size_t>(p) * layout.bytes;
      const int64_t valid = std::min(T, m - p * T);
      for (int64_t j0 = 0; j0 < count; j0 += static_cast<int64_t>(kRows)) {
        const int64_t rows = std::min(static_cast<int64_t>(kRows), count - j0);
        if (accumulate) {
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t j = 0; j < rows; ++j) out[j * T + t] = t < valid ? y[(p * T + t) * ldy + j0 + j] : 0.0f;
          }
        }
        micro(rows, j0, panel, b0, b1, accumulate, out);
        for (int64_t t = 0; t < valid; ++t) {
          float* yt = y + (p * T + t) * ldy + j0;
          for (int64_t j = 0; j < rows; ++j) yt[j] = out[j * T + t];
        }
      }
    }
  }
}

// The int16 form (rows decoded by int16_rows.h) and the bf16 one: MicroTile.
template <bool kMins, bool kBf16 = false>
void RunTileInt16(const Int16Rows& w, int64_t count, const uint8_t* tokens, const PanelLayout& layout, int64_t m,
                  float* y, int64_t ldy) {
  RunTile<kTileR>(w.n, w.block, 2, count, tokens, layout, m, y, ldy,
                  [&](int64_t rows, int64_t j0, const uint8_t* panel, int64_t b0, int64_t b1, bool accumulate,
                      float* out) {
                    ForRowCount<kTileR>(rows, [&](auto r) DEFERKV_INLINE_LAMBDA {
                      MicroTile<r, kMins, kBf16>(w, j0, panel, layout, b0, b1, accumulate, out);
                    });
                  });
}

// BF16 weights (Bf16Kernel's targets): each tile's rows copied into Int16Rows' layout
// (runs of 32 values of the group's rows side by side), their bits unchanged.
void GemmBf16(const uint8_t* w, size_t row_stride, int64_t n, int64_t rows, const uint8_t* tokens,
              const PanelLayout& layout, int64_t m, float* y, int64_t ldy, void* scratch) {
#if HWY_TARGET <= HWY_AVX3
  const int64_t tile = tile_rows(n);
  Int16Rows tiled;
  tiled.n = n;
  tiled.block = bf16_block(n);
  tiled.group_rows = static_cast<int64_t>(kTileR);
  tiled.q = static_cast<int16_t*>(scratch);
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    for (int64_t r = 0; r < count; ++r) {
      const uint8_t* row = w + (r0 + r) * row_stride;
      for (int64_t k = 0; k < n; k += Int16Rows::kRunValues) {
        std::memcpy(tiled.at(r, k), row + k * 2, Int16Rows::kRunValues * 2);
      }
    }
    RunTileInt16<false, true>(tiled, count, tokens, layout, m, y + r0, ldy);
  }
#else
  (void)w, (void)row_stride, (void)n, (void)rows, (void)tokens, (void)layout, (void)m, (void)y, (void)ldy,
      (void)scratch;
  fail("gemm_int16: no bf16 kernel on this target");
#endif
}

bool Bf16Kernel() { return HWY_TARGET <= HWY_AVX3; }

// The int8 form (Int8Kernel's types on AVX2): rows decoded here, MicroTileInt8.
void GemmInt8(DType weight_type, const uint8_t* w, size_t row_stride, int64_t n, int64_t rows,
              const uint8_t* tokens, const PanelLayout& layout, int64_t m, float* y, int64_t ldy, void* scratch) {
#if HWY_TARGET == HWY_AVX2
  const int64_t tile = tile_rows(n);
  const int64_t sub = weight_type == DType::Q6_K ? 16 : 32;
  const int block = static_cast<int>(dtype_block_elems(weight_type));
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    const Int8Rows decoded = int8_rows_in(scratch, count, n, sub, block);
    const uint8_t* from = w + r0 * row_stride;
    switch (weight_type) {
      case DType::Q4_K: DecodeK4Bytes<BlockQ4_K>(from, row_stride, count, decoded); break;
      case DType::Q5_K: DecodeK4Bytes<BlockQ5_K>(from, row_stride, count, decoded); break;
      case DType::Q4_0: DecodeQ40Bytes(from, row_stride, count, decoded); break;
      default: DecodeQ6KBytes(from, row_stride, count, decoded); break;
    }
    RunTile<kTileR8>(n, block, 1, count, tokens, layout, m, y + r0, ldy,
                     [&](int64_t rows_here, int64_t j0, const uint8_t* panel, int64_t b0, int64_t b1,
                         bool accumulate, float* out) {
                       ForRowCount<kTileR8>(rows_here, [&](auto r) DEFERKV_INLINE_LAMBDA {
                         switch (weight_type) {
                           case DType::Q4_K:
                             MicroTileInt8<r, 8, 32, 4>(decoded, j0, panel, layout, b0, b1, accumulate, out);
                             break;
                           case DType::Q5_K:
                             MicroTileInt8<r, 4, 32, 4>(decoded, j0, panel, layout, b0, b1, accumulate, out);
                             break;
                           case DType::Q4_0:
                             MicroTileInt8<r, 8, 32, 0, kQ32>(decoded, j0, panel, layout, b0, b1, accumulate, out);
                             break;
                           default:
                             MicroTileInt8<r, 2, 16, 8>(decoded, j0, panel, layout, b0, b1, accumulate, out);
                             break;
                         }
                       });
                     });
  }
#else
  (void)weight_type, (void)w, (void)row_stride, (void)n, (void)rows, (void)tokens, (void)layout, (void)m, (void)y,
      (void)ldy, (void)scratch;
  fail("gemm_int16: no int8 kernel on this target");
#endif
}

// int8_tokens: the tokens were packed in the int8 form (gemm_int16_takes_int8).
void GemmInt16(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
               const void* tokens, bool int8_tokens, int64_t m, float* y, int64_t ldy, void* scratch) {
  const auto block = static_cast<int>(dtype_block_elems(weight_type));
  const PanelLayout layout = panel_layout(n, block, PanelTokens(), token_form(weight_type, int8_tokens));
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* panels = static_cast<const uint8_t*>(tokens);
  if (weight_type == DType::BF16) {
    GemmBf16(w, row_stride, n, rows, panels, layout, m, y, ldy, scratch);
    return;
  }
  if (int8_tokens) {
    GemmInt8(weight_type, w, row_stride, n, rows, panels, layout, m, y, ldy, scratch);
    return;
  }
  const int64_t tile = tile_rows(n);
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    const Int16Rows decoded = int16_rows_in(scratch, weight_type, count, n, static_cast<int64_t>(kTileR));
    decode_int16_rows(weight_type, w + r0 * row_stride, row_stride, count, decoded);
    if (decoded.mins != nullptr) {
      RunTileInt16<true>(decoded, count, panels, layout, m, y + r0, ldy);
    } else {
      RunTileInt16<false>(decoded, count, panels, layout, m, y + r0, ldy);
    }
  }
}

// Whether prompts against this type's weights take gemm_int16 on this target. Not Q8_0 on
// AVX2: its weights are signed bytes, which vpmaddubsw cannot take without a sign step per
// product, so they meet the tokens as int16 in vpmaddwd, and on Zen 4 capped to AVX2 that
// ran pp512 13-15% slower than matmul's float32 GEMM of the dequantised rows (100M and 500M
// Q8_0, one and two threads; bench/README.md, "Q8_0 prompts on AVX2"). With AVX-512 the
// int16 form wins (vpmaddwd on 512 bits, or VNNI's vpdpwssd).
bool Serves(DType weight_type) { return HWY_TARGET != HWY_AVX2 || weight_type != DType::Q8_0; }
#else  // other CPUs: matmul's float path serves the quantised types.

int64_t PanelTokens() { return 2; }
void GemmInt16(DType, const void*, size_t, int64_t, int64_t, const void*, bool, int64_t, float*, int64_t, void*) {
  fail("gemm_int16: needs AVX2 or AVX-512 (check gemm_int16_serves first)");
}
bool Serves(DType) { return false; }
bool Int8Kernel(DType) { return false; }
bool Bf16Kernel() { return false; }

#endif

const char* DispatchedTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(PanelTokens);
HWY_EXPORT(GemmInt16);
HWY_EXPORT(Serves);
HWY_EXPORT(Int8Kernel);
HWY_EXPORT(Bf16Kernel);
HWY_EXPORT(DispatchedTarget);

// Fewer tokens than this take matmul's matvec path instead. A panel costs as much for one
// token as for T (32 with AVX-512): at 16 tokens the two paths took the same time, at 32
// the GEMM half (kernels_bench's gemm_int16 against matmul_small_m, 4096 x 4096, Q4_K).
constexpr int64_t kMinTokens = 16;
// BF16 weights: below this, matmul's matvec route (float32 tokens against the widened
// weights) is as fast, and a panel of 32 tokens would be mostly padding.
constexpr int64_t kBf16MinTokens = 32;

std::atomic<Bf16Activation>& bf16_setting() {
  static std::atomic<Bf16Activation> setting{[] {
    const char* value = std::getenv(kBf16ActivationVariable);
    return value != nullptr && *value != '\0' ? parse_bf16_activation(value) : Bf16Activation::kBf16;
  }()};
  return setting;
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace

Bf16Activation parse_bf16_activation(const std::string& name) {
  static constexpr SettingName<Bf16Activation> kNames[] = {{"bf16", Bf16Activation::kBf16},
                                                           {"f32", Bf16Activation::kF32}};
  return parse_setting<Bf16Activation>(kBf16ActivationVariable, name, "a BF16 activation form", kNames);
}

Bf16Activation bf16_activation() { return bf16_setting().load(std::memory_order_relaxed); }

void set_bf16_activation(Bf16Activation form) { bf16_setting().store(form, std::memory_order_relaxed); }

bool gemm_int16_takes_bf16() {
  return bf16_activation() == Bf16Activation::kBf16 && cpu_has_avx512_bf16() && HWY_DYNAMIC_DISPATCH(Bf16Kernel)();
}

bool gemm_int16_serves(DType weight_type, int64_t n, int64_t m) {
  if (weight_type == DType::BF16) {
    return m >= kBf16MinTokens && n % Int16Rows::kRunValues == 0 && gemm_int16_takes_bf16();
  }
  return m >= kMinTokens && has_int16_rows(weight_type) && HWY_DYNAMIC_DISPATCH(Serves)(weight_type);
}

int64_t gemm_int16_panel_tokens() { return HWY_DYNAMIC_DISPATCH(PanelTokens)(); }

const char* gemm_int16_target() { return HWY_DYNAMIC_DISPATCH(DispatchedTarget)(); }

bool gemm_int16_takes_int8(DType weight_type) {
  return kquant_activation() == KQuantActivation::kInt8 && HWY_DYNAMIC_DISPATCH(Int8Kernel)(weight_type);
}

size_t gemm_int16_tokens_bytes(DType weight_type, int64_t n, int64_t m) {
  const int64_t t = gemm_int16_panel_tokens();
  const int block = static_cast<int>(dtype_block_elems(weight_type));
  const TokenForm form = token_form(weight_type, gemm_int16_takes_int8(weight_type));
  return static_cast<size_t>((m + t - 1) / t) * panel_layout(n, block, t, form).bytes;
}

void gemm_int16_pack_tokens(DType weight_type, const float* x, int64_t ldx, int64_t n, int64_t m,
                            int64_t first_panel, int64_t panels, void* out) {
  const int64_t T = gemm_int16_panel_tokens();
  const int block = static_cast<int>(dtype_block_elems(weight_type));
  const TokenForm form = token_form(weight_type, gemm_int16_takes_int8(weight_type));
  const PanelLayout layout = panel_layout(n, block, T, form);
  const int64_t nb = n / block;
  // The int8 tokens' blocks are the weights' for Q4_0 (32), else the K-quants' 256.
  const int int8_block = form == TokenForm::kInt8Offsets ? kQ32 : kQK;
  std::vector<unsigned char> packed(has_int8_values(form) ? packed_layout_int8(n, int8_block).total
                                                          : packed_layout(n, block).total);
  for (int64_t p = first_panel; p < first_panel + panels; ++p) {
    auto* panel = static_cast<unsigned char*>(out) + static_cast<size_t>(p) * layout.bytes;
    if ((p + 1) * T > m) std::memset(panel, 0, layout.bytes);
    auto* q = reinterpret_cast<int32_t*>(panel);
    auto* d = reinterpret_cast<float*>(panel + layout.d);
    auto* sums = reinterpret_cast<int32_t*>(panel + layout.sums);
    for (int64_t t = 0; t < T && p * T + t < m; ++t) {
      const float* xt = x + (p * T + t) * ldx;
      if (form == TokenForm::kBf16) {
        for (int64_t k = 0; k < n; k += 2) {
          q[k / 2 * T + t] = static_cast<int32_t>(fp32_to_bf16(xt[k]) | uint32_t{fp32_to_bf16(xt[k + 1])} << 16);
        }
        continue;
      }
      if (has_int8_values(form)) {
        pack_int8_blocks(xt, n, packed.data(), int8_block);
        const PackedActivationInt8 token = packed_view_int8(packed.data(), n, int8_block);
        for (int64_t k = 0; k < n; k += 4) q[k / 4 * T + t] = load_four(token.q + k);
        for (int64_t b = 0; b < nb; ++b) d[b * T + t] = token.d[b];
        if (form == TokenForm::kInt8Offsets) {
          for (int64_t b = 0; b < nb; ++b) sums[b * T + t] = 8 * token.sums[b];
        } else {
          const int16_t* token_sums = form == TokenForm::kInt8Sums16 ? token.sums16 : token.sums;
          const auto count = static_cast<int64_t>(2 * sums_per_block(form, block)) * nb;
          for (int64_t s = 0; s < count; s += 2) sums[s / 2 * T + t] = load_pair(token_sums + s);
        }
        continue;
      }
      pack_int16_blocks(xt, n, block, packed.data());
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
  // A tile is a multiple of every target's kTileR rows, so its groups are whole. The int8
  // form of a tile (K-quants on AVX2) takes less, but which form runs is decided later.
  if (weight_type == DType::BF16) return round_up(static_cast<size_t>(tile_rows(n) * n) * sizeof(uint16_t));
  if (!has_int16_rows(weight_type)) return 0;
  size_t int8_bytes = 0;
  int8_rows_in(nullptr, tile_rows(n), n, 16, static_cast<int64_t>(dtype_block_elems(weight_type)), &int8_bytes);
  return std::max(int16_rows_bytes(weight_type, tile_rows(n), n, 1), int8_bytes);
}

void gemm_int16(DType weight_type, const void* weights, size_t row_stride, int64_t n, int64_t rows,
                const void* tokens, int64_t m, float* y, int64_t ldy, void* scratch) {
  HWY_DYNAMIC_DISPATCH(GemmInt16)(weight_type, weights, row_stride, n, rows, tokens,
                                  gemm_int16_takes_int8(weight_type), m, y, ldy, scratch);
}
}  // namespace deferkv
#endif
