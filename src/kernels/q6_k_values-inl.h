// The six-bit values of a Q6_K block (layout in quant_blocks.h) assembled in int16 lanes,
// for the matvec kernel and gemm_int16's decoder. Included per target (toggle guard).
#if defined(DEFERKV_KERNELS_Q6_K_VALUES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DEFERKV_KERNELS_Q6_K_VALUES_INL_H_
#undef DEFERKV_KERNELS_Q6_K_VALUES_INL_H_
#else
#define DEFERKV_KERNELS_Q6_K_VALUES_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Values k .. k + lanes of each 32-value group of half `half` of a block, in [0, 63]:
// group[g] holds values 128 * half + 32 * g + k onwards.
template <class D16>
struct Q6Groups {
  hn::Vec<D16> group[4];

  HWY_INLINE Q6Groups(D16 d16, const BlockQ6_K& block, int half, size_t k) {
    const hn::Rebind<uint8_t, D16> d8;
    const auto low4 = hn::Set(d16, 15);
    const auto bits45 = hn::Set(d16, 48);
    const uint8_t* ql = block.ql + 64 * half;
    const uint8_t* qh = block.qh + 32 * half;
    const auto a = hn::PromoteTo(d16, hn::LoadU(d8, ql + k));
    const auto c = hn::PromoteTo(d16, hn::LoadU(d8, ql + 32 + k));
    const auto h = hn::PromoteTo(d16, hn::LoadU(d8, qh + k));
    group[0] = hn::Or(hn::And(a, low4), hn::And(hn::ShiftLeft<4>(h), bits45));
    group[1] = hn::Or(hn::And(c, low4), hn::And(hn::ShiftLeft<2>(h), bits45));
    group[2] = hn::Or(hn::ShiftRight<4>(a), hn::And(h, bits45));
    group[3] = hn::Or(hn::ShiftRight<4>(c), hn::And(hn::ShiftRight<2>(h), bits45));
  }
};

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
