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

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// Scores of R query rows against the J keys from k (one row of d each) into s[r * lds + c]:
// R x J accumulators, the R query vectors and one key vector stay in registers.
template <size_t R, size_t J, class T>
HWY_INLINE void ScoreKeys(const float* q, int64_t ldq, const T* k, int64_t d, float* s, int64_t lds) {
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t whole = d / L * L;
  DEFERKV_VECTORS(hn::Vec<decltype(df)>, acc, R, J);
  Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::Zero(df); }); });
  for (int64_t i = 0; i < whole; i += L) {
    DEFERKV_VECTORS(hn::Vec<decltype(df)>, qv, R);
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { qv[r] = hn::LoadU(df, q + r * ldq + i); });
    Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA {
      const auto kv = LoadF32(df, k + c * d + i);
      Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::MulAdd(qv[r], kv, acc[r][c]); });
    });
  }
  Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
    Unroll<J>([&](auto c) DEFERKV_INLINE_LAMBDA {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
      for (int64_t i = whole; i < d; ++i) sum += q[r * ldq + i] * ToF32(k[c * d + i]);
      s[r * lds + c] = sum;
    });
  });
}

// J = 8 / R keys at a time (at most about ten vectors live), the last keys one at a time.
template <size_t R, class T>
void ScoresRows(const float* q, int64_t ldq, const T* keys, int64_t d, int64_t width, float* s, int64_t lds) {
  constexpr size_t J = R >= 8 ? 1 : 8 / R;
  int64_t j = 0;
  for (; j + static_cast<int64_t>(J) <= width; j += J) ScoreKeys<R, J>(q, ldq, keys + j * d, d, s + j, lds);
  for (; j < width; ++j) ScoreKeys<R, 1>(q, ldq, keys + j * d, d, s + j, lds);
}

// Columns [i0, i0 + C lanes) of R output rows = probabilities x values (added to out's
// when accumulate): R x C accumulators live across every value row.
template <size_t R, size_t C, class T>
HWY_INLINE void WeighColumns(const float* p, int64_t ldp, const T* values, int64_t d, int64_t width, int64_t i0,
                             float* out, int64_t ldo, bool accumulate) {
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  DEFERKV_VECTORS(hn::Vec<decltype(df)>, acc, R, C);
  Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
    Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA {
      acc[r][c] = accumulate ? hn::LoadU(df, out + r * ldo + i0 + c * L) : hn::Zero(df);
    });
  });
  for (int64_t j = 0; j < width; ++j) {
    DEFERKV_VECTORS(hn::Vec<decltype(df)>, v, C);
    Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { v[c] = LoadF32(df, values + j * d + i0 + c * L); });
    Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
      const auto pr = hn::Set(df, p[r * ldp + j]);
      Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { acc[r][c] = hn::MulAdd(pr, v[c], acc[r][c]); });
    });
  }
  Unroll<R>([&](auto r) DEFERKV_INLINE_LAMBDA {
    Unroll<C>([&](auto c) DEFERKV_INLINE_LAMBDA { hn::StoreU(acc[r][c], df, out + r * ldo + i0 + c * L); });
  });
}

// C = 8 / R vectors of columns a pass (the values read once per pass), the whole vectors
// left over one at a time, then the tail past them.
template <size_t R, class T>
void ValuesRows(const float* p, int64_t ldp, const T* values, int64_t d, int64_t width, float* out, int64_t ldo,
                bool accumulate) {
  constexpr size_t C = R >= 8 ? 1 : 8 / R;
  const auto L = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  const int64_t whole = d / L * L;
  int64_t i0 = 0;
  for (; i0 + static_cast<int64_t>(C) * L <= whole; i0 += static_cast<int64_t>(C) * L) {
    WeighColumns<R, C>(p, ldp, values, d, width, i0, out, ldo, accumulate);
  }
  for (; i0 < whole; i0 += L) WeighColumns<R, 1>(p, ldp, values, d, width, i0, out, ldo, accumulate);
  for (int64_t i = whole; i < d; ++i) {
    for (size_t r = 0; r < R; ++r) {
      float sum = accumulate ? out[r * ldo + i] : 0.0f;
      for (int64_t j = 0; j < width; ++j) sum += p[r * ldp + j] * ToF32(values[j * d + i]);
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

// Calls kernel(rows as above, the rows' element type: a null hwy::float16_t or
// hwy::bfloat16_t pointer).
template <class Kernel>
void ForRowCountAndType(int64_t rows, bool bf16, const Kernel& kernel) {
  ForRowCount(rows, [&](auto r) {
    if (bf16) {
      kernel(r, static_cast<const hwy::bfloat16_t*>(nullptr));
    } else {
      kernel(r, static_cast<const hwy::float16_t*>(nullptr));
    }
  });
}

void HalfKeyScores(const float* q, int64_t ldq, int64_t rows, const uint16_t* keys, bool bf16, int64_t d,
                   int64_t width, float* s, int64_t lds) {
  ForRowCountAndType(rows, bf16, [&](auto r, auto type) {
    ScoresRows<decltype(r)::value>(q, ldq, reinterpret_cast<decltype(type)>(keys), d, width, s, lds);
  });
}

void HalfWeightedValues(const float* p, int64_t ldp, int64_t rows, const uint16_t* values, bool bf16, int64_t d,
                        int64_t width, float* out, int64_t ldo, bool accumulate) {
  ForRowCountAndType(rows, bf16, [&](auto r, auto type) {
    ValuesRows<decltype(r)::value>(p, ldp, reinterpret_cast<decltype(type)>(values), d, width, out, ldo, accumulate);
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
                             int64_t head_dim, int64_t width, float* out, int64_t ld_out, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(HalfWeightedValues)(probs, ld_probs, rows, values, bf16, head_dim, width, out, ld_out,
                                           accumulate);
}
}  // namespace deferkv
#endif
