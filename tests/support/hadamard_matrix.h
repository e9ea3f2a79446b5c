#pragma once
// The orthonormal Walsh-Hadamard matrix of order n from its definition, H[i][j] =
// (-1)^popcount(i & j) / sqrt(n), applied in double precision to each block of n values:
// the independent reference for kernels/hadamard.h and the KV cache's rotated rows.
#include <bit>
#include <cmath>
#include <vector>

namespace deferkv::testing {

inline std::vector<double> hadamard_by_definition(const std::vector<double>& x, size_t n) {
  std::vector<double> y(x.size(), 0.0);
  for (size_t b = 0; b < x.size(); b += n) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) y[b + i] += (std::popcount(i & j) % 2 ? -x[b + j] : x[b + j]) / std::sqrt(double(n));
    }
  }
  return y;
}

}  // namespace deferkv::testing
