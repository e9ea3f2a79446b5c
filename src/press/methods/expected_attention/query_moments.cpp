#include "press/methods/expected_attention/query_moments.h"

#include <algorithm>

#include "base/thread_pool.h"
#include "kernels/vec.h"

namespace deferkv {

void QueryMoments::add(const float* rows, int64_t n, int64_t n_head, int64_t d, bool with_second, ThreadPool& pool) {
  const auto width = static_cast<size_t>(n_head * d);
  if (n_head_ == 0) {
    n_head_ = n_head;
    d_ = d;
    shift_.assign(width, 0.0f);
    sum_.assign(width, 0.0);
    batch_sum_.resize(width);
  }
  if (with_second && second_.empty()) {
    second_.assign(width * static_cast<size_t>(d), 0.0);
    batch_second_.resize(second_.size());
  }
  if (n <= 0) return;
  if (count_ == 0) shift_.assign(rows, rows + width);
  centred_.resize(std::max(centred_.size(), static_cast<size_t>(n) * width));
  count_ += n;
  pool.parallel_for(n_head, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t h = begin; h < end; ++h) {
      float* sum = batch_sum_.data() + h * d;
      float* second = with_second ? batch_second_.data() + h * d * d : nullptr;
      std::fill(sum, sum + d, 0.0f);
      if (second != nullptr) std::fill(second, second + d * d, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        float* x = centred_.data() + i * static_cast<int64_t>(width) + h * d;
        for (int64_t a = 0; a < d; ++a) x[a] = rows[i * static_cast<int64_t>(width) + h * d + a] - shift_[h * d + a];
        add_f32(x, sum, d);
        if (second == nullptr) continue;
        for (int64_t a = 0; a < d; ++a) axpy_f32(x[a], x, second + a * d, d);
      }
      for (int64_t a = 0; a < d; ++a) sum_[h * d + a] += sum[a];
      if (second == nullptr) continue;
      for (int64_t a = 0; a < d * d; ++a) second_[h * d * d + a] += second[a];
    }
  });
}

std::vector<double> QueryMoments::mean(int64_t h) const {
  std::vector<double> mu(static_cast<size_t>(d_), 0.0);
  if (count_ == 0) return mu;
  for (int64_t a = 0; a < d_; ++a) mu[a] = shift_[h * d_ + a] + sum_[h * d_ + a] / static_cast<double>(count_);
  return mu;
}

std::vector<double> QueryMoments::covariance(int64_t h) const {
  std::vector<double> sigma(static_cast<size_t>(d_ * d_), 0.0);
  if (count_ == 0) return sigma;
  const double n = static_cast<double>(count_);
  const double* sum = sum_.data() + h * d_;
  for (int64_t a = 0; a < d_; ++a) {
    for (int64_t b = 0; b < d_; ++b) {
      sigma[a * d_ + b] = second_[(h * d_ + a) * d_ + b] / n - (sum[a] / n) * (sum[b] / n);
    }
  }
  return sigma;
}

}  // namespace deferkv
