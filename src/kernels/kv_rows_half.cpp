// Decode-step attention products over fp16 / bf16 KV rows, converted in registers as they
// are read (kv_rows.h: kv_key_scores and kv_weighted_values for at most kFusedKvRows query
// rows). A decode step has few query rows per KV head (its group of query heads), where the
// tile path (dequantise a tile of rows to float32, then a GEMM) paid a store and a reload
// of every float and a GEMM made for many rows: the two took ~40% of a batched decode step
// on the 100M model at depth 512. Products and sums in float32, as the tile path, in
// another order.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kv_rows_half.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <type_traits>

#include "kernels/kernel_helpers-inl.h"
#include "kernels/kv_rows.h"
#include "kernels/quant.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes of one stored row as float32, and one element for the tail past the whole vectors.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalf(DF df, const uint16_t* p, std::false_type /*bf16*/) {
  return LoadF16AsF32(df, reinterpret_cast<const hwy::float16_t*>(p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalf(DF df, const uint16_t* p, std::true_type /*bf16*/) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), reinterpret_cast<const hwy::bfloat16_t*>(p)));
}
inline float HalfToF32(uint16_t h, std::false_type /*bf16*/) { return fp16_to_fp32(h); }
inline float HalfToF32(uint16_t h, std::true_type /*bf16*/) { return bf16_to_fp32(h); }

// R query rows against J keys at a time: R x J accumulators, the R query vectors and one
// key vector stay in registers (J = 8 / R keys, so at most about ten vectors live).
template <size_t R, class Bf16>
void ScoresRows(const float* q, int64_t ldq, const uint16_t* keys, int64_t d, int64_t width, float* s, int64_t lds,
                Bf16 bf16) {
  constexpr size_t J = R >= 8 ? 1 : 8 / R;
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t whole = d / L * L;
  const auto tail = [&](size_t r, const uint16_t* k) {
    float sum = 0;
    for (int64_t i = whole; i < d; ++i) sum += q[r * ldq + i] * HalfToF32(k[i], bf16);
    return sum;
  };
  int64_t j = 0;
  for (; j + static_cast<int64_t>(J) <= width; j += J) {
    const uint16_t* k = keys + j * d;
    hn::Vec<decltype(df)> acc[R][J];
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::Zero(df); }); });
    for (int64_t i = 0; i < whole; i += L) {
      hn::Vec<decltype(df)> qv[R];
      Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { qv[r] = hn::LoadU(df, q + r * ldq + i); });
      Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA {
        const auto kv = LoadHalf(df, k + c * d + i, bf16);
        Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::MulAdd(qv[r], kv, acc[r][c]); });
      });
    }
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
      Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA {
        s[r * lds + j + c] = hn::GetLane(hn::SumOfLanes(df, acc[r][c])) + tail(r, k + c * d);
      });
    });
  }
  for (; j < width; ++j) {  // the last keys, one at a time
    const uint16_t* k = keys + j * d;
    hn::Vec<decltype(df)> acc[R];
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r] = hn::Zero(df); });
    for (int64_t i = 0; i < whole; i += L) {
      const auto kv = LoadHalf(df, k + i, bf16);
      Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r] = hn::MulAdd(hn::LoadU(df, q + r * ldq + i), kv, acc[r]); });
    }
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { s[r * lds + j] = hn::GetLane(hn::SumOfLanes(df, acc[r])) + tail(r, k); });
  }
}

// out rows = probabilities x values, C vectors of the row's width at a time: R x C
// accumulators live across every value row (C = 8 / R), the values read once per pass.
template <size_t R, class Bf16>
void ValuesRows(const float* p, int64_t ldp, const uint16_t* values, int64_t d, int64_t width, float* out,
                int64_t ldo, Bf16 bf16) {
  constexpr size_t C = R >= 8 ? 1 : 8 / R;
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t whole = d / L * L;
  int64_t i0 = 0;
  for (; i0 + static_cast<int64_t>(C) * L <= whole; i0 += static_cast<int64_t>(C) * L) {
    hn::Vec<decltype(df)> acc[R][C];
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::Zero(df); }); });
    for (int64_t j = 0; j < width; ++j) {
      hn::Vec<decltype(df)> v[C];
      Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { v[c] = LoadHalf(df, values + j * d + i0 + c * L, bf16); });
      Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
        const auto pr = hn::Set(df, p[r * ldp + j]);
        Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::MulAdd(pr, v[c], acc[r][c]); });
      });
    }
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
      Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { hn::StoreU(acc[r][c], df, out + r * ldo + i0 + c * L); });
    });
  }
  for (; i0 < whole; i0 += L) {  // whole vectors left over, one at a time
    hn::Vec<decltype(df)> acc[R];
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r] = hn::Zero(df); });
    for (int64_t j = 0; j < width; ++j) {
      const auto v = LoadHalf(df, values + j * d + i0, bf16);
      Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r] = hn::MulAdd(hn::Set(df, p[r * ldp + j]), v, acc[r]); });
    }
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { hn::StoreU(acc[r], df, out + r * ldo + i0); });
  }
  for (int64_t i = whole; i < d; ++i) {  // the tail past the whole vectors
    for (size_t r = 0; r < R; ++r) {
      float sum = 0;
      for (int64_t j = 0; j < width; ++j) sum += p[r * ldp + j] * HalfToF32(values[j * d + i], bf16);
      out[r * ldo + i] = sum;
    }
  }
}

// Calls kernel(std::integral_constant<size_t, R>{}) with R = rows, 1..kFusedKvRows: the
// number of query rows picks the instantiation, whose arrays of vectors live in registers.
template <class Kernel>
void ForRowCount(int64_t rows, const Kernel& kernel) {
  static_assert(kFusedKvRows == 8);
  switch (rows) {
    case 1: return kernel(std::integral_constant<size_t, 1>{});
    case 2: return kernel(std::integral_constant<size_t, 2>{});
    case 3: return kernel(std::integral_constant<size_t, 3>{});
    case 4: return kernel(std::integral_constant<size_t, 4>{});
    case 5: return kernel(std::integral_constant<size_t, 5>{});
    case 6: return kernel(std::integral_constant<size_t, 6>{});
    case 7: return kernel(std::integral_constant<size_t, 7>{});
    default: return kernel(std::integral_constant<size_t, 8>{});
  }
}

// Calls kernel(rows as above, fp16 or bf16 as std::false_type or std::true_type).
template <class Kernel>
void ForRowCountAndType(int64_t rows, bool bf16, const Kernel& kernel) {
  ForRowCount(rows, [&](auto r) {
    if (bf16) {
      kernel(r, std::true_type{});
    } else {
      kernel(r, std::false_type{});
    }
  });
}

void HalfKeyScores(const float* q, int64_t ldq, int64_t rows, const uint16_t* keys, bool bf16, int64_t d,
                   int64_t width, float* s, int64_t lds) {
  ForRowCountAndType(rows, bf16, [&](auto r, auto type) {
    ScoresRows<decltype(r)::value>(q, ldq, keys, d, width, s, lds, type);
  });
}

void HalfWeightedValues(const float* p, int64_t ldp, int64_t rows, const uint16_t* values, bool bf16, int64_t d,
                        int64_t width, float* out, int64_t ldo) {
  ForRowCountAndType(rows, bf16, [&](auto r, auto type) {
    ValuesRows<decltype(r)::value>(p, ldp, values, d, width, out, ldo, type);
  });
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(HalfKeyScores);
HWY_EXPORT(HalfWeightedValues);
}  // namespace

void half_kv_key_scores(const float* queries, int64_t ld_queries, int64_t rows, const uint16_t* keys, bool bf16,
                        int64_t head_dim, int64_t width, float* scores, int64_t ld_scores) {
  HWY_DYNAMIC_DISPATCH(HalfKeyScores)(queries, ld_queries, rows, keys, bf16, head_dim, width, scores, ld_scores);
}

void half_kv_weighted_values(const float* probs, int64_t ld_probs, int64_t rows, const uint16_t* values, bool bf16,
                             int64_t head_dim, int64_t width, float* out, int64_t ld_out) {
  HWY_DYNAMIC_DISPATCH(HalfWeightedValues)(probs, ld_probs, rows, values, bf16, head_dim, width, out, ld_out);
}
}  // namespace deferkv
#endif
