#pragma once
// The running mean and covariance of one layer's queries, per query head (Expected
// Attention's Gaussian). Sigma = E[q q^T] - mu mu^T from plain float32 sums cancels away
// when the mean is large against the spread and the prompt is long, so each batch's rows
// are summed in float32 around a shift (the head's first query: the sums stay of the
// spread's size), and the batch sums are added up in double.
#include <cstdint>
#include <vector>

namespace deferkv {

class ThreadPool;

class QueryMoments {
 public:
  // Adds n rows of n_head x d values; with_second: also the second moments.
  void add(const float* rows, int64_t n, int64_t n_head, int64_t d, bool with_second, ThreadPool& pool);

  int64_t count() const { return count_; }
  int64_t n_head() const { return n_head_; }
  // mu of query head h [d]; zeros before any row (after a first add, even of none).
  std::vector<double> mean(int64_t h) const;
  // Sigma of query head h [d x d], row-major (needs with_second on every add).
  std::vector<double> covariance(int64_t h) const;

 private:
  int64_t count_ = 0;
  int64_t n_head_ = 0, d_ = 0;
  std::vector<float> shift_;         // [n_head][d]
  std::vector<double> sum_;          // [n_head][d]: of q - shift
  std::vector<double> second_;       // [n_head][d][d]: of (q - shift)(q - shift)^T
  std::vector<float> batch_sum_, batch_second_, centred_;  // one batch's float32 sums, reused
};

}  // namespace deferkv
