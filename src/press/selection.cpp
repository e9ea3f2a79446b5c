#include "press/selection.h"

#include <algorithm>
#include <numeric>

namespace deferkv {

std::vector<int32_t> top_k(const std::vector<float>& scores, int64_t k) {
  const auto n = static_cast<int64_t>(scores.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int32_t> order = index_range(0, n);
  auto better = [&](int32_t a, int32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), better);
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<int32_t> top_chunks(const std::vector<float>& scores, int64_t chunk, int64_t n_chunks) {
  const auto n = static_cast<int64_t>(scores.size());
  const int64_t count = (n + chunk - 1) / chunk;
  std::vector<float> chunk_scores(static_cast<size_t>(count));
  for (int64_t c = 0; c < count; ++c) {
    const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
    double sum = 0;
    for (int64_t j = begin; j < end; ++j) sum += scores[j];
    chunk_scores[c] = static_cast<float>(sum / static_cast<double>(end - begin));
  }
  std::vector<int32_t> kept;
  for (int32_t c : top_k(chunk_scores, n_chunks)) {
    for (int64_t j = c * chunk; j < std::min(n, (c + 1) * chunk); ++j) kept.push_back(static_cast<int32_t>(j));
  }
  return kept;
}

std::vector<int32_t> merge_indices(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int32_t> index_range(int64_t begin, int64_t end) {
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(out.begin(), out.end(), static_cast<int32_t>(begin));
  return out;
}

}  // namespace deferkv
