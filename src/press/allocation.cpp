#include "press/allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "deferkv/error.h"

namespace deferkv {

std::vector<int64_t> round_preserving_sum(const std::vector<double>& shares, int64_t total) {
  std::vector<int64_t> out(shares.size());
  std::vector<size_t> order(shares.size());
  int64_t assigned = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    out[i] = static_cast<int64_t>(std::floor(shares[i]));
    assigned += out[i];
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return shares[a] - std::floor(shares[a]) > shares[b] - std::floor(shares[b]);
  });
  for (size_t i = 0; assigned < total && i < order.size(); ++i, ++assigned) ++out[order[i]];
  return out;
}

std::vector<int64_t> pyramid_layer_budgets(int64_t base, int64_t n_candidates, int64_t n_layer,
                                           int64_t beta) {
  if (beta <= 0) fail("pyramidkv: beta must be positive, got {}", beta);
  if (n_layer == 1) return {std::min(base, n_candidates)};
  int64_t min_budget = base / beta;
  int64_t max_budget = 2 * base - min_budget;
  if (max_budget >= n_candidates) {
    max_budget = n_candidates;
    min_budget = 2 * base - max_budget;
  }
  std::vector<double> shares(static_cast<size_t>(n_layer));
  const double step = static_cast<double>(max_budget - min_budget) / static_cast<double>(n_layer - 1);
  for (int64_t l = 0; l < n_layer; ++l) shares[l] = std::max(0.0, max_budget - step * static_cast<double>(l));
  return round_preserving_sum(shares, std::min(base, n_candidates) * n_layer);
}

std::vector<int64_t> adakv_head_budgets(const std::vector<std::vector<float>>& scores, int64_t base,
                                        double alpha) {
  const auto heads = static_cast<int64_t>(scores.size());
  struct Entry {
    float score;
    int32_t head;
    int32_t index;
  };
  std::vector<Entry> all;
  for (int32_t g = 0; g < heads; ++g) {
    for (size_t j = 0; j < scores[g].size(); ++j) all.push_back({scores[g][j], g, static_cast<int32_t>(j)});
  }
  const int64_t winners = std::min<int64_t>(heads * base, static_cast<int64_t>(all.size()));
  std::nth_element(all.begin(), all.begin() + winners, all.end(), [](const Entry& a, const Entry& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.head != b.head ? a.head < b.head : a.index < b.index;
  });
  std::vector<int64_t> won(static_cast<size_t>(heads), 0);
  for (int64_t i = 0; i < winners; ++i) ++won[all[i].head];

  const auto floor_budget = static_cast<int64_t>(static_cast<double>(base) * alpha);
  std::vector<double> shares(static_cast<size_t>(heads));
  double total = 0;
  for (int64_t g = 0; g < heads; ++g) {
    shares[g] = std::min(static_cast<double>(won[g]) * (1.0 - alpha) + static_cast<double>(floor_budget),
                         static_cast<double>(scores[g].size()));
    total += shares[g];
  }
  return round_preserving_sum(shares, std::min<int64_t>(std::llround(total), heads * base));
}

std::vector<int64_t> error_aware_layer_budgets(const std::vector<double>& u, int64_t b, int64_t floor, int64_t cap) {
  const auto n = static_cast<int64_t>(u.size());
  const int64_t total = b * n;
  std::vector<int64_t> out(u.size());
  int64_t sum = 0;
  for (int64_t l = 0; l < n; ++l) {
    out[l] = std::clamp<int64_t>(floor + std::llround(u[l] * static_cast<double>(total - floor * n)), floor, cap);
    sum += out[l];
  }
  std::vector<size_t> order(u.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return u[a] > u[c]; });
  // Repair one step at a time, cycling through the layers in u order.
  for (bool changed = true; sum != total && changed;) {
    changed = false;
    for (size_t i = 0; i < order.size() && sum != total; ++i) {
      if (sum < total) {
        const size_t l = order[i];
        if (out[l] < cap) ++out[l], ++sum, changed = true;
      } else {
        const size_t l = order[order.size() - 1 - i];
        if (out[l] > floor) --out[l], --sum, changed = true;
      }
    }
  }
  return out;
}

}  // namespace deferkv
