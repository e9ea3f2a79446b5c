// gemm_f32_nt (gemm.h): register tiles of RM tokens x RN weight rows, each pair's dot
// product accumulated in its own vector along n and reduced once at the end.
//
// Why not OpenBLAS sgemm: the packaged OpenBLAS (0.3.21) does not know Zen 5 and runs
// its AVX2 (Haswell) kernels there, half the FMA width the core has; these tiles use
// the widest vectors the CPU offers (~120 GFLOP/s single-threaded on Zen 5 against
// sgemm's ~95). OpenBLAS's own AVX-512 kernels are faster still (forced on with
// OPENBLAS_CORETYPE=SkylakeX, F16 pp512 ran ~1.4x faster than with these tiles), so
// where it picks them itself sgemm may be the better choice. Weight rows are read in place.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_f32.cpp"
#include "kernels/hwy_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/kernel_helpers-inl.h"

HWY_BEFORE_NAMESPACE();
namespace deferkv::HWY_NAMESPACE {
namespace {

// Tile shape: RM * RN accumulators plus RN weight vectors and one activation vector
// must fit the register file (32 vector registers with AVX-512, 16 otherwise). With
// AVX-512, 6 x 4 measured faster than 4 x 6, 5 x 5 or 4 x 4 (n = 768 and 2048, m = 512).
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kTileM = 6;
constexpr size_t kTileN = 4;
#else
constexpr size_t kTileM = 3;
constexpr size_t kTileN = 4;
#endif

// Weight rows per block: a block stays in L2 (128 KiB) while every token tile runs
// against it, so that weights come from L2 and the RM token rows from L1.
constexpr int64_t kBlockBytes = 128 << 10;

// y[i * ldy + j] = dot(x row i, w row j) for i < RM, j < RN.
template <size_t RM, size_t RN>
HWY_INLINE void Tile(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t n, float* y,
                     int64_t ldy) {
  const hn::ScalableTag<float> df;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  DEFERKV_VECTORS(hn::Vec<decltype(df)>, acc, RM, RN);
  Unroll<RM>([&](auto i) DEFERKV_INLINE_LAMBDA {
    Unroll<RN>([&](auto j) DEFERKV_INLINE_LAMBDA { acc[i][j] = hn::Zero(df); });
  });
  int64_t k = 0;
  for (; k + L <= n; k += L) {
    DEFERKV_VECTORS(hn::Vec<decltype(df)>, wv, RN);
    Unroll<RN>([&](auto j) DEFERKV_INLINE_LAMBDA { wv[j] = hn::LoadU(df, w + j * ldw + k); });
    Unroll<RM>([&](auto i) DEFERKV_INLINE_LAMBDA {
      const auto xv = hn::LoadU(df, x + i * ldx + k);
      Unroll<RN>([&](auto j) DEFERKV_INLINE_LAMBDA { acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]); });
    });
  }
  Unroll<RM>([&](auto i) DEFERKV_INLINE_LAMBDA {
    Unroll<RN>([&](auto j) DEFERKV_INLINE_LAMBDA {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[i][j]));
      for (int64_t t = k; t < n; ++t) sum += x[i * ldx + t] * w[j * ldw + t];
      y[i * ldy + j] = sum;
    });
  });
}

// RM tokens against weight rows [j0, j1): whole tiles, then one row at a time.
template <size_t RM>
HWY_INLINE void TokenRows(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t j0, int64_t j1,
                          int64_t n, float* y, int64_t ldy) {
  int64_t j = j0;
  for (; j + static_cast<int64_t>(kTileN) <= j1; j += kTileN) {
    Tile<RM, kTileN>(x, ldx, w + j * ldw, ldw, n, y + j, ldy);
  }
  for (; j < j1; ++j) Tile<RM, 1>(x, ldx, w + j * ldw, ldw, n, y + j, ldy);
}

void GemmF32NT(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t rows,
               int64_t n, float* y, int64_t ldy) {
  const int64_t block = std::max<int64_t>(kTileN, kBlockBytes / 4 / std::max<int64_t>(1, n) / kTileN * kTileN);
  for (int64_t j0 = 0; j0 < rows; j0 += block) {
    const int64_t j1 = std::min(rows, j0 + block);
    int64_t i = 0;
    for (; i + static_cast<int64_t>(kTileM) <= m; i += kTileM) {
      TokenRows<kTileM>(x + i * ldx, ldx, w, ldw, j0, j1, n, y + i * ldy, ldy);
    }
    for (; i < m; ++i) TokenRows<1>(x + i * ldx, ldx, w, ldw, j0, j1, n, y + i * ldy, ldy);
  }
}

}  // namespace
}  // namespace deferkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace deferkv {
namespace {
HWY_EXPORT(GemmF32NT);
}  // namespace

void gemm_f32_nt(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t rows, int64_t n,
                 float* y, int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(GemmF32NT)(x, ldx, m, w, ldw, rows, n, y, ldy);
}
}  // namespace deferkv
#endif
