// The Walsh-Hadamard transform (hadamard.h) with Highway: the butterflies between values
// at least a vector apart are whole-vector adds and subtracts; those within a vector pair
// each lane with lane ^ half through a permute. Every output is the same a + b or a - b
// as in the textbook fast transform, so the result does not depend on the vector width.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/hadamard.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>

#include "kernels/hadamard.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// The butterflies of one block of `order` values (a power of two) at x, unscaled.
void ButterfliesScalar(float* x, int64_t order) {
  for (int64_t half = 1; half < order; half *= 2) {
    for (int64_t start = 0; start < order; start += 2 * half) {
      for (int64_t i = start; i < start + half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a + b;
        x[i + half] = a - b;
      }
    }
  }
}

void HadamardBlocks(float* x, int64_t n, int64_t order) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  const float norm = 1.0f / std::sqrt(static_cast<float>(order));
  for (float* block = x; block < x + n; block += order) {
    if (order < lanes) {
      ButterfliesScalar(block, order);
      for (int64_t i = 0; i < order; ++i) block[i] *= norm;
      continue;
    }
    // Stages half < lanes: lane i takes x[i] + x[i ^ half] when bit `half` of i is clear,
    // x[i ^ half] - x[i] when it is set.
    for (int64_t v = 0; v < order; v += lanes) {
      auto values = hn::LoadU(df, block + v);
      const auto lane = hn::Iota(di, 0);
      for (int32_t half = 1; half < lanes; half *= 2) {
        const auto partner = hn::TableLookupLanes(values, hn::IndicesFromVec(df, hn::Xor(lane, hn::Set(di, half))));
        const auto upper = hn::RebindMask(df, hn::Ne(hn::And(lane, hn::Set(di, half)), hn::Zero(di)));
        values = hn::IfThenElse(upper, hn::Sub(partner, values), hn::Add(values, partner));
      }
      hn::StoreU(values, df, block + v);
    }
    // Stages half >= lanes: whole vectors.
    for (int64_t half = lanes; half < order; half *= 2) {
      for (int64_t start = 0; start < order; start += 2 * half) {
        for (int64_t i = start; i < start + half; i += lanes) {
          const auto a = hn::LoadU(df, block + i), b = hn::LoadU(df, block + i + half);
          hn::StoreU(hn::Add(a, b), df, block + i);
          hn::StoreU(hn::Sub(a, b), df, block + i + half);
        }
      }
    }
    const auto scale = hn::Set(df, norm);
    for (int64_t i = 0; i < order; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(df, block + i), scale), df, block + i);
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(HadamardBlocks);
}  // namespace

void hadamard_blocks(float* x, int64_t n, int64_t order) { HWY_DYNAMIC_DISPATCH(HadamardBlocks)(x, n, order); }

}  // namespace deferkv
#endif  // HWY_ONCE
