#pragma once
// Shared by the kernel tests: seeded random data, quantised matrices, float64 references,
// and running a check once per SIMD target the kernels were compiled for.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "kernels/simd_target.h"
#include "tensor/dtype.h"

namespace deferkv::testing {

inline constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                      DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

inline bool is_quantised(DType type) { return dtype_block_elems(type) > 1; }

inline std::vector<float> random_normal(size_t count, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

// rows x n weights stored in `type`, each row followed by `padding` unused bytes.
struct WeightMatrix {
  DType type;
  int64_t rows;
  int64_t n;
  size_t stride;
  std::vector<unsigned char> bytes;

  const unsigned char* row(int64_t r) const { return bytes.data() + r * stride; }
};

inline WeightMatrix quantise_matrix(DType type, const std::vector<float>& values, int64_t rows, int64_t n,
                                    size_t padding = 0) {
  WeightMatrix m{type, rows, n, static_cast<size_t>(dtype_row_bytes(type, n)) + padding, {}};
  m.bytes.assign(m.stride * static_cast<size_t>(rows), 0xa5);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, values.data() + r * n, m.bytes.data() + r * m.stride, n);
  }
  return m;
}

// Dot products of the dequantised rows with x, in float64; also sum |w_i x_i| per row,
// the scale against which a float32 result's rounding error is judged.
struct ReferenceDots {
  std::vector<double> dot;
  std::vector<double> magnitude;
};

inline ReferenceDots reference_dots(const WeightMatrix& w, const float* x) {
  ReferenceDots ref{std::vector<double>(w.rows), std::vector<double>(w.rows)};
  std::vector<float> row(static_cast<size_t>(w.n));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.n);
    for (int64_t i = 0; i < w.n; ++i) {
      ref.dot[r] += static_cast<double>(row[i]) * x[i];
      ref.magnitude[r] += std::fabs(static_cast<double>(row[i]) * x[i]);
    }
  }
  return ref;
}

// ||y - ref|| / ||ref|| over all rows.
inline double relative_error(const float* y, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t r = 0; r < ref.size(); ++r) {
    err += (y[r] - ref[r]) * (y[r] - ref[r]);
    norm += ref[r] * ref[r];
  }
  return std::sqrt(err / norm);
}

// Runs check(target name) once for each instruction set the kernels are built for
// (hwy_targets.h) that this CPU supports, with dynamic dispatch forced to it. Which ones ran
// is the test's property "simd_targets" (in ctest's XML output), since a CPU without AVX-512
// skips that one: a green run on such a machine says nothing of it.
// `targets` names them for a kernel built for others (gemm_int16.cpp adds AVX3_DL).
template <class Check>
void for_each_simd_target_in(const std::vector<int64_t>& targets, const Check& check) {
  const int64_t supported = hwy::SupportedTargets();
  std::string ran;
  for (int64_t target : targets) {
    if ((supported & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check(hwy::TargetName(target));
    ran += std::string(ran.empty() ? "" : " ") + hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
  ::testing::Test::RecordProperty("simd_targets", ran);
}

template <class Check>
void for_each_simd_target(std::initializer_list<int64_t> targets, const Check& check) {
  for_each_simd_target_in(std::vector<int64_t>(targets), check);
}

// Every target the kernels are built for (hwy_targets.h: x86's or aarch64's), so that a
// target the CPU has but no kernel was built for is not run, nor recorded as run, as the
// fallback it would dispatch to. (SVE's fixed-length targets run only at their vector
// length: SVE_256 at 256 bits, SVE2_128 at 128.)
template <class Check>
void for_each_simd_target(const Check& check) {
  const int64_t built = built_simd_targets();
  std::vector<int64_t> targets;
  for (int64_t target : {int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SVE2_128}, int64_t{HWY_SVE_256},
                         int64_t{HWY_SVE2}, int64_t{HWY_SVE}, int64_t{HWY_NEON}}) {
    if ((built & target) != 0) targets.push_back(target);
  }
  // The portable fallback, EMU128 in the kernels' list (Highway dispatches a forced SCALAR
  // to it), where it is built: not on aarch64, where NEON is the baseline and so the
  // fallback of dispatch.
  if ((built & (HWY_SCALAR | HWY_EMU128)) != 0) targets.push_back(HWY_SCALAR);
  for_each_simd_target_in(targets, check);
}

}  // namespace deferkv::testing
