// Expected Attention's query statistics against a double-precision computation, on a long
// prompt whose queries have a mean far larger than their spread: E[q q^T] - mu mu^T from
// float32 sums would cancel to noise there (a mutant summing without the shift, in float32
// across batches or within them, fails this test).
#include <gtest/gtest.h>

#include <random>

#include "base/thread_pool.h"
#include "press/methods/expected_attention/query_moments.h"

namespace deferkv {
namespace {

TEST(QueryMoments, KeepTheCovarianceOfALongPromptWithALargeMean) {
  constexpr int64_t kHeads = 2, kDim = 4, kRows = 20000, kBatch = 512;
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> rows(static_cast<size_t>(kRows * kHeads * kDim));
  for (int64_t i = 0; i < kRows; ++i) {
    const double shared = normal(rng);  // correlates dimensions 0 and 1
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t a = 0; a < kDim; ++a) {
        const double spread = (a < 2 ? shared : 0.0) + 0.5 * normal(rng);
        rows[static_cast<size_t>((i * kHeads + h) * kDim + a)] = static_cast<float>(800.0 * (a + 1) + spread);
      }
    }
  }
  ThreadPool pool(2);
  QueryMoments moments;
  for (int64_t begin = 0; begin < kRows; begin += kBatch) {
    moments.add(rows.data() + begin * kHeads * kDim, std::min(kBatch, kRows - begin), kHeads, kDim, true, pool);
  }
  ASSERT_EQ(moments.count(), kRows);
  ASSERT_EQ(moments.n_head(), kHeads);
  for (int64_t h = 0; h < kHeads; ++h) {
    // Two passes in double over the same float rows.
    std::vector<double> mu(kDim, 0.0), sigma(kDim * kDim, 0.0);
    for (int64_t i = 0; i < kRows; ++i) {
      const float* q = rows.data() + (i * kHeads + h) * kDim;
      for (int64_t a = 0; a < kDim; ++a) mu[a] += q[a] / static_cast<double>(kRows);
    }
    for (int64_t i = 0; i < kRows; ++i) {
      const float* q = rows.data() + (i * kHeads + h) * kDim;
      for (int64_t a = 0; a < kDim; ++a) {
        for (int64_t b = 0; b < kDim; ++b) {
          sigma[a * kDim + b] += (q[a] - mu[a]) * (q[b] - mu[b]) / static_cast<double>(kRows);
        }
      }
    }
    const std::vector<double> got_mu = moments.mean(h), got_sigma = moments.covariance(h);
    for (int64_t a = 0; a < kDim; ++a) EXPECT_NEAR(got_mu[a], mu[a], 1e-6 * std::abs(mu[a])) << h << " " << a;
    // The true covariance is ~1.25 on dimensions 0 and 1 (1 shared between them), 0.25 on 2
    // and 3; float32 totals of values near 10^7 would be off by more than 1.
    for (int64_t i = 0; i < kDim * kDim; ++i) {
      EXPECT_NEAR(got_sigma[i], sigma[i], 2e-3) << "head " << h << " entry " << i;
    }
  }
}

}  // namespace
}  // namespace deferkv
