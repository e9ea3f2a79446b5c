// The values of a Q4_K/Q5_K block (layout in quant_blocks.h) as bytes, for the x86 kernels
// that keep them bytes: the int8-activation matvec (matvec_k4_int8.cpp) and gemm_int16's
// AVX2 decoder. Included per target (toggle guard).
#if defined(DEFERKV_KERNELS_K4_VALUES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DEFERKV_KERNELS_K4_VALUES_INL_H_
#undef DEFERKV_KERNELS_K4_VALUES_INL_H_
#else
#define DEFERKV_KERNELS_K4_VALUES_INL_H_
#endif

#include <type_traits>

#include <hwy/highway.h>

#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Sub-blocks 2c (lo) and 2c + 1 (hi) of the block, 32 bytes each: the low and high nibbles
// of qs[32c ..], with Q5_K's fifth bits (bits 2c and 2c + 1 of qh) merged in.
template <class Block>
HWY_INLINE void K4Bytes(const Block& block, int c, __m256i& lo, __m256i& hi) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs + 32 * c));
  lo = _mm256_and_si256(q, mask);
  hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh));
    const __m256i one = _mm256_set1_epi8(1);
    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
    hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
  }
}
#endif

}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
