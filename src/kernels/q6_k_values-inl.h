// The six-bit values of a Q6_K block (layout in quant_blocks.h) assembled in int16 lanes,
// for the matvec kernel and gemm_int16's decoder, and in bytes for the x86 kernels that
// keep them bytes (the int8-activation matvec, gemm_int16's AVX2 decoder). Included per
// target (toggle guard).
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
// Group(g) holds values 128 * half + 32 * g + k onwards. Assembled once for all four groups,
// except on SVE, whose vectors can be no class members: there each Group(g) assembles its
// own from the bytes (a few loads more).
template <class D16>
class Q6Groups {
 public:
#if HWY_HAVE_SCALABLE
  HWY_INLINE Q6Groups(D16, const BlockQ6_K& block, int half, size_t k)
      : ql_(block.ql + 64 * half + k), qh_(block.qh + 32 * half + k) {}

  HWY_INLINE hn::Vec<D16> Group(int g) const {
    const D16 d16;
    const hn::Rebind<uint8_t, D16> d8;
    const auto low4 = hn::Set(d16, 15);
    const auto bits45 = hn::Set(d16, 48);
    const auto bytes = hn::PromoteTo(d16, hn::LoadU(d8, ql_ + 32 * (g % 2)));
    const auto h = hn::PromoteTo(d16, hn::LoadU(d8, qh_));
    return Assemble(g, bytes, h, low4, bits45);
  }

 private:
  const uint8_t* ql_;
  const uint8_t* qh_;
#else
  HWY_INLINE Q6Groups(D16 d16, const BlockQ6_K& block, int half, size_t k) {
    const hn::Rebind<uint8_t, D16> d8;
    const auto low4 = hn::Set(d16, 15);
    const auto bits45 = hn::Set(d16, 48);
    const uint8_t* ql = block.ql + 64 * half;
    const uint8_t* qh = block.qh + 32 * half;
    const auto a = hn::PromoteTo(d16, hn::LoadU(d8, ql + k));
    const auto c = hn::PromoteTo(d16, hn::LoadU(d8, ql + 32 + k));
    const auto h = hn::PromoteTo(d16, hn::LoadU(d8, qh + k));
    group_[0] = Assemble(0, a, h, low4, bits45);
    group_[1] = Assemble(1, c, h, low4, bits45);
    group_[2] = Assemble(2, a, h, low4, bits45);
    group_[3] = Assemble(3, c, h, low4, bits45);
  }

  HWY_INLINE hn::Vec<D16> Group(int g) const { return group_[g]; }

 private:
  hn::Vec<D16> group_[4];
#endif

  // Group g from the widened ql bytes at 32 * (g % 2) (low nibbles for groups 0 and 1, high
  // for 2 and 3) and qh bytes (bits 2g and 2g + 1 moved to bits 4 and 5). One expression:
  // as separate statements it changed the order of x86's instructions.
  HWY_INLINE static hn::Vec<D16> Assemble(int g, hn::Vec<D16> bytes, hn::Vec<D16> h, hn::Vec<D16> low4,
                                          hn::Vec<D16> bits45) {
    return hn::Or(g < 2 ? hn::And(bytes, low4) : hn::ShiftRight<4>(bytes),
                  hn::And(g == 0   ? hn::ShiftLeft<4>(h)
                          : g == 1 ? hn::ShiftLeft<2>(h)
                          : g == 2 ? h
                                   : hn::ShiftRight<2>(h),
                          bits45));
  }
};

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Group g of a half as 32 bytes in [0, 63] (Q6Groups' arrangement): `ql` the half's 32 ql
// bytes at 32 * (g % 2), `qh` its 32 qh bytes. The low nibbles for groups 0 and 1, the high
// for 2 and 3; bits 2g and 2g + 1 of qh moved to bits 4 and 5 (a 16-bit shift, the mask
// dropping what crossed from the neighbouring byte).
HWY_INLINE __m256i Q6GroupBytes(__m256i ql, __m256i qh, int g) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  const __m256i nibbles = g < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
  const __m256i moved = g == 0   ? _mm256_slli_epi16(qh, 4)
                        : g == 1 ? _mm256_slli_epi16(qh, 2)
                        : g == 2 ? qh
                                 : _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(nibbles, _mm256_and_si256(moved, bits45));
}
#endif

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
