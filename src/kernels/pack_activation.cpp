// pack_int16_blocks and pack_int8_blocks: quantise the activation vector into the integer
// blocks that the matvec kernels consume (layouts and ranges in packed_activation.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/pack_activation.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// At most a block of 32 values a vector (SVE's may hold 64 floats).
using BlockTag = hn::CappedTag<float, 32>;

void PackInt16Blocks(const float* x, int64_t n, int block, void* packed) {
  const BlockTag df;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  auto* base = static_cast<unsigned char*>(packed);
  const PackedLayout offsets = packed_layout(n, block);
  auto* scales = reinterpret_cast<float*>(base);
  auto* sums = reinterpret_cast<int16_t*>(base + offsets.sums);
  auto* q = reinterpret_cast<int16_t*>(base + offsets.q);
  const auto qmax = static_cast<float>(block == 256 ? kPackedMax256 : kPackedMax32);

  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    int16_t* qb = q + b * block;
    auto vmax = hn::Zero(df);
    for (int64_t i = 0; i < block; i += L) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    scales[b] = amax / qmax;
    const auto inv = hn::Set(df, amax > 0.0f ? qmax / amax : 0.0f);
    for (int64_t i = 0; i < block; i += L) {
      hn::StoreU(hn::DemoteTo(d16, hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), inv))), d16, qb + i);
    }
    if (block == 256) {
      for (int s = 0; s < 8; ++s) {
        int sum = 0;
        for (int l = 0; l < 32; ++l) sum += qb[32 * s + l];
        sums[b * 8 + s] = static_cast<int16_t>(sum);
      }
    }
  }
}

// The int8 form: blocks of 256 or 32, d = max|x| / 127, and each 32 and each 16 values' sums.
void PackInt8Blocks(const float* x, int64_t n, int block, void* packed) {
  const BlockTag df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  auto* base = static_cast<unsigned char*>(packed);
  const PackedLayoutInt8 offsets = packed_layout_int8(n, block);
  auto* scales = reinterpret_cast<float*>(base);
  auto* sums = reinterpret_cast<int16_t*>(base + offsets.sums);
  auto* sums16 = reinterpret_cast<int16_t*>(base + offsets.sums16);
  auto* q = reinterpret_cast<int8_t*>(base + offsets.q);
  const auto qmax = static_cast<float>(kPackedMaxInt8);
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    auto vmax = hn::Zero(df);
    for (int64_t i = 0; i < block; i += L) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    scales[b] = amax / qmax;
    const auto inv = hn::Set(df, amax > 0.0f ? qmax / amax : 0.0f);
    for (int64_t i = 0; i < block; i += L) {
      hn::StoreU(hn::DemoteTo(d8, hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), inv))), d8, qb + i);
    }
  }
  for (int64_t s = 0; s < n / 16; ++s) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += q[16 * s + l];
    sums16[s] = static_cast<int16_t>(sum);
  }
  for (int64_t s = 0; s < n / 32; ++s) sums[s] = static_cast<int16_t>(sums16[2 * s] + sums16[2 * s + 1]);
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(PackInt16Blocks);
HWY_EXPORT(PackInt8Blocks);
}  // namespace

void pack_int8_blocks(const float* x, int64_t n, void* packed, int block) {
  HWY_DYNAMIC_DISPATCH(PackInt8Blocks)(x, n, block, packed);
}

void pack_int16_blocks(const float* x, int64_t n, int block, void* packed) {
  HWY_DYNAMIC_DISPATCH(PackInt16Blocks)(x, n, block, packed);
}
}  // namespace deferkv
#endif
