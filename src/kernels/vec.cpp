// Float32 vector kernels (vec.h). Whole vectors first, then a scalar tail.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vec.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/vec.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

float DotF32(const float* a, const float* b, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  // Four accumulators hide the FMA latency.
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    acc0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
    acc1 = hn::MulAdd(hn::LoadU(df, a + i + L), hn::LoadU(df, b + i + L), acc1);
    acc2 = hn::MulAdd(hn::LoadU(df, a + i + 2 * L), hn::LoadU(df, b + i + 2 * L), acc2);
    acc3 = hn::MulAdd(hn::LoadU(df, a + i + 3 * L), hn::LoadU(df, b + i + 3 * L), acc3);
  }
  for (; i + L <= n; i += L) acc0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3))));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AxpyF32(float a, const float* x, float* y, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::MulAdd(va, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void ScaleF32(float a, float* x, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(va, hn::LoadU(df, x + i)), df, x + i);
  for (; i < n; ++i) x[i] *= a;
}

void AddF32(const float* x, float* y, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Add(hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

void RmsNormF32(const float* x, const float* weight, float eps, float* out, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const float inv_rms = 1.0f / std::sqrt(DotF32(x, x, n) / static_cast<float>(n) + eps);
  const auto scale = hn::Set(df, inv_rms);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), scale), hn::LoadU(df, weight + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

float MaxF32(const float* x, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  float max = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  if (n >= L) {
    auto vmax = hn::LoadU(df, x);
    for (i = L; i + L <= n; i += L) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
    max = hn::GetLane(hn::MaxOfLanes(df, vmax));
  }
  for (; i < n; ++i) max = std::max(max, x[i]);
  return max;
}

int64_t FirstNotAboveF32(const float* x, int64_t n, float cut) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto vcut = hn::Set(df, cut);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const intptr_t at = hn::FindFirstTrue(df, hn::Not(hn::Gt(hn::LoadU(df, x + i), vcut)));
    if (at >= 0) return i + at;
  }
  for (; i < n; ++i) {
    if (!(x[i] > cut)) return i;
  }
  return n;
}

// e = exp(x - shift) for n values, stored to `out` (which may be x) when kStore; returns
// their sum. One code for both, so the sum does not depend on whether e is stored.
template <bool kStore>
float ExpShift(const float* x, float shift, int64_t n, float* out) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto vneg_shift = hn::Set(df, -shift);
  auto vsum = hn::Zero(df);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto e = hn::Exp(df, hn::Add(hn::LoadU(df, x + i), vneg_shift));
    if constexpr (kStore) hn::StoreU(e, df, out + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; i < n; ++i) {
    const float e = std::exp(x[i] - shift);
    if constexpr (kStore) out[i] = e;
    sum += e;
  }
  return sum;
}

float ExpShiftF32(float* x, float shift, int64_t n) { return ExpShift<true>(x, shift, n, x); }

float ExpShiftToF32(const float* x, float shift, int64_t n, float* out) {
  return out != nullptr ? ExpShift<true>(x, shift, n, out) : ExpShift<false>(x, shift, n, nullptr);
}

void DivideF32(float* x, float d, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto vd = hn::Set(df, d);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Div(hn::LoadU(df, x + i), vd), df, x + i);
  for (; i < n; ++i) x[i] /= d;
}

// Exp is valid for exponents <= 0 (after the max is subtracted) and returns 0 below
// -104, so masked -inf scores become 0.
float SoftmaxF32(float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  const float sum = ExpShiftF32(x, MaxF32(x, n), n);
  ScaleF32(1.0f / sum, x, n);
  return sum;
}

void SwigluF32(float* gate, const float* up, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f);
  // Exp is valid up to +88; beyond that silu(g) = g / (1 + e^-g) is 0 to float precision.
  const auto exp_limit = hn::Set(df, 88.0f);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto g = hn::LoadU(df, gate + i);
    const auto e = hn::Exp(df, hn::Min(hn::Neg(g), exp_limit));
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, e)), hn::LoadU(df, up + i)), df, gate + i);
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// phi(u) = e^u - 1 - u of one vector of u (clamped at 80). Below |u| = 0.5 a Taylor
// series to u^9 (truncation error under float precision): expm1(u) - u would lose the
// leading digits of phi ~ u^2/2 there.
template <class V>
V ExpExcess(DF df, V u) {
  u = hn::Min(u, hn::Set(df, 80.0f));
  auto tail = hn::Set(df, 1.0f / 362880.0f);
  for (const float c : {1.0f / 40320, 1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f}) {
    tail = hn::MulAdd(u, tail, hn::Set(df, c));
  }
  const auto series = hn::Mul(hn::Mul(u, u), tail);
  return hn::IfThenElse(hn::Gt(hn::Abs(u), hn::Set(df, 0.5f)), hn::Sub(hn::Expm1(df, u), u), series);
}

float WeightedExpm1ExcessF32(const float* w, const float* x, float shift, int64_t n) {
  const DF df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  const auto vshift = hn::Set(df, shift);
  auto vsum = hn::Zero(df);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    vsum = hn::MulAdd(hn::LoadU(df, w + i), ExpExcess(df, hn::Sub(hn::LoadU(df, x + i), vshift)), vsum);
  }
  if (i < n) {  // the tail, padded with weight 0
    HWY_ALIGN float wt[hn::MaxLanes(df)] = {}, xt[hn::MaxLanes(df)] = {};
    std::copy(w + i, w + n, wt);
    std::copy(x + i, x + n, xt);
    vsum = hn::MulAdd(hn::Load(df, wt), ExpExcess(df, hn::Sub(hn::Load(df, xt), vshift)), vsum);
  }
  return hn::GetLane(hn::SumOfLanes(df, vsum));
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(DotF32);
HWY_EXPORT(AxpyF32);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(AddF32);
HWY_EXPORT(RmsNormF32);
HWY_EXPORT(SoftmaxF32);
HWY_EXPORT(SwigluF32);
HWY_EXPORT(MaxF32);
HWY_EXPORT(FirstNotAboveF32);
HWY_EXPORT(ExpShiftF32);
HWY_EXPORT(ExpShiftToF32);
HWY_EXPORT(DivideF32);
HWY_EXPORT(WeightedExpm1ExcessF32);
}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n); }
void axpy_f32(float a, const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n); }
void scale_f32(float a, float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(ScaleF32)(a, x, n); }
void add_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(AddF32)(x, y, n); }
void rms_norm_f32(const float* x, const float* weight, float eps, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RmsNormF32)(x, weight, eps, out, n);
}
float softmax_f32(float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SoftmaxF32)(x, n); }
void swiglu_f32(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluF32)(gate, up, n); }
float max_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(MaxF32)(x, n); }
int64_t first_not_above_f32(const float* x, int64_t n, float cut) {
  return HWY_DYNAMIC_DISPATCH(FirstNotAboveF32)(x, n, cut);
}
float exp_shift_f32(float* x, float shift, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftF32)(x, shift, n);
}
float exp_shift_to_f32(const float* x, float shift, int64_t n, float* out) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftToF32)(x, shift, n, out);
}
void divide_f32(float* x, float d, int64_t n) { HWY_DYNAMIC_DISPATCH(DivideF32)(x, d, n); }
float weighted_expm1_excess_f32(const float* w, const float* x, float shift, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(WeightedExpm1ExcessF32)(w, x, shift, n);
}
}  // namespace deferkv
#endif
