#include "press/kept_set_reference.h"

#include "model/test_models.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <utility>

namespace deferkv::testing {

std::string kept_set_model_path() {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = kKeptSetLayers;
  spec.n_head = kKeptSetShape.n_head;
  spec.n_head_kv = kKeptSetShape.n_head_kv;
  spec.n_ff = 128;
  spec.seed = 29;
  return random_model_path(spec);
}

std::vector<int32_t> distinct_prompt(int64_t n) {
  std::vector<int32_t> tokens(498);
  std::iota(tokens.begin(), tokens.end(), 3);
  std::shuffle(tokens.begin(), tokens.end(), std::mt19937(11));
  return std::vector<int32_t>(tokens.begin(), tokens.begin() + n);
}

const ReferenceTrace& kept_set_trace(int64_t n) {
  static std::map<int64_t, ReferenceTrace> traces;  // tests run on one thread
  auto it = traces.find(n);
  if (it == traces.end()) it = traces.emplace(n, reference_trace(kept_set_model_path(), distinct_prompt(n), KeyVisibility{})).first;
  return it->second;
}

std::vector<double> rope_rotated(std::vector<double> x, double t) {
  const auto d = static_cast<double>(x.size());
  for (size_t i = 0; i < x.size() / 2; ++i) {
    const double theta = t * std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
    const double a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * std::cos(theta) - b * std::sin(theta);
    x[2 * i + 1] = a * std::sin(theta) + b * std::cos(theta);
  }
  return x;
}

Scores attention_row(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t head,
                     int64_t t, const Positions& keys) {
  Positions visible = keys.empty() ? span(0, t + 1) : keys;
  const int64_t g = head / shape.group(), d = shape.head_dim;
  const std::vector<double>& q = trace.queries[layer][t];
  Scores logits;
  for (int32_t j : visible) {
    const std::vector<double>& k = trace.keys[layer][j];
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += q[head * d + i] * k[g * d + i];
    logits.push_back(dot / std::sqrt(static_cast<double>(d)));
  }
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double& x : logits) sum += (x = std::exp(x - top));
  for (double& x : logits) x /= sum;
  return logits;
}

Scores group_attention(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t g,
                       const std::vector<int64_t>& queries, const std::vector<double>& weights, int64_t n_keys) {
  Scores out(static_cast<size_t>(n_keys), 0.0);
  for (size_t i = 0; i < queries.size(); ++i) {
    for (int64_t h = g * shape.group(); h < (g + 1) * shape.group(); ++h) {
      const Scores row = attention_row(trace, shape, layer, h, queries[i]);
      for (int64_t j = 0; j < n_keys && j < static_cast<int64_t>(row.size()); ++j) {
        out[j] += weights[i] * row[j] / static_cast<double>(shape.group());
      }
    }
  }
  return out;
}

Scores first(const Scores& s, int64_t n) { return Scores(s.begin(), s.begin() + n); }

Scores max_pool(const Scores& s, int64_t kernel) {
  const auto n = static_cast<int64_t>(s.size());
  Scores out(s.size());
  for (int64_t j = 0; j < n; ++j) {
    out[j] = s[j];
    for (int64_t i = std::max<int64_t>(0, j - kernel / 2); i <= std::min(n - 1, j + kernel / 2); ++i) {
      out[j] = std::max(out[j], s[i]);
    }
  }
  return out;
}

Positions best(const Scores& s, int64_t k) {
  Positions order = span(0, static_cast<int64_t>(s.size()));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  order.resize(static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(s.size()))));
  std::sort(order.begin(), order.end());
  return order;
}

Positions best_chunks(const Scores& s, int64_t chunk, int64_t n_chunks) {
  const auto n = static_cast<int64_t>(s.size());
  Scores means;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    means.push_back(std::accumulate(s.begin() + begin, s.begin() + end, 0.0) / static_cast<double>(end - begin));
  }
  Positions kept;
  for (int32_t c : best(means, n_chunks)) {
    for (int64_t j = c * chunk; j < std::min(n, (c + 1) * chunk); ++j) kept.push_back(static_cast<int32_t>(j));
  }
  return kept;
}

std::vector<int64_t> largest_remainder(const std::vector<double>& shares, int64_t total) {
  std::vector<int64_t> out;
  Scores fraction;
  for (double x : shares) {
    out.push_back(static_cast<int64_t>(std::floor(x)));
    fraction.push_back(x - std::floor(x));
  }
  const int64_t missing = total - std::accumulate(out.begin(), out.end(), int64_t{0});
  for (int32_t i : best(fraction, missing)) ++out[i];
  return out;
}

namespace {

// The pyramid's top (layer 0) and bottom budgets.
std::pair<int64_t, int64_t> pyramid_ends(int64_t base, int64_t candidates, int64_t beta) {
  const int64_t low = base / beta, high = 2 * base - low;
  if (high >= candidates) return {candidates, 2 * base - candidates};
  return {high, low};
}

}  // namespace

std::vector<int64_t> pyramid_budgets(int64_t base, int64_t candidates, int64_t n_layer, int64_t beta) {
  const auto [high, low] = pyramid_ends(base, candidates, beta);
  std::vector<double> shares;
  for (int64_t l = 0; l < n_layer; ++l) {
    shares.push_back(std::max(0.0, static_cast<double>(high) -
                                       static_cast<double>(l) * static_cast<double>(high - low) / static_cast<double>(n_layer - 1)));
  }
  return largest_remainder(shares, std::min(base, candidates) * n_layer);
}

std::vector<int64_t> pyramid_budgets_floored_step(int64_t base, int64_t candidates, int64_t n_layer, int64_t beta) {
  const auto [high, low] = pyramid_ends(base, candidates, beta);
  std::vector<int64_t> out;
  for (int64_t l = 0; l < n_layer; ++l) out.push_back(high - l * ((high - low) / (n_layer - 1)));
  return out;
}

std::vector<int64_t> adakv_budgets(const std::vector<Scores>& pooled, int64_t base, double alpha) {
  // One ranking of every head's scores (ties: lower head, then lower index: the order of
  // the concatenation).
  Scores all;
  std::vector<int64_t> head_of;
  for (size_t g = 0; g < pooled.size(); ++g) {
    all.insert(all.end(), pooled[g].begin(), pooled[g].end());
    head_of.insert(head_of.end(), pooled[g].size(), static_cast<int64_t>(g));
  }
  std::vector<int64_t> won(pooled.size(), 0);
  for (int32_t i : best(all, static_cast<int64_t>(pooled.size()) * base)) ++won[head_of[i]];
  const auto floor_share = static_cast<double>(static_cast<int64_t>(static_cast<double>(base) * alpha));
  std::vector<double> shares;
  for (size_t g = 0; g < pooled.size(); ++g) {
    shares.push_back(std::min(static_cast<double>(won[g]) * (1.0 - alpha) + floor_share,
                              static_cast<double>(pooled[g].size())));
  }
  const int64_t total = std::min<int64_t>(std::llround(std::accumulate(shares.begin(), shares.end(), 0.0)),
                                          static_cast<int64_t>(pooled.size()) * base);
  return largest_remainder(shares, total);
}

double key_norm(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t g, int64_t j) {
  double sum = 0;
  for (int64_t i = 0; i < shape.head_dim; ++i) {
    const double k = trace.keys[layer][j][g * shape.head_dim + i];
    sum += k * k;
  }
  return std::sqrt(sum);
}

Positions united(const Positions& a, const Positions& b) {
  Positions out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

Positions span(int64_t begin, int64_t end) {
  Positions out(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(out.begin(), out.end(), static_cast<int32_t>(begin));
  return out;
}

}  // namespace deferkv::testing
