// Expected Attention against a direct double-precision evaluation of its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/press.h"
#include "kernels/attention_tap.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

constexpr int64_t kDim = 4, kHeads = 2, kPrompt = 24, kBudget = 9, kSinks = 2, kFuture = 16;
constexpr double kBase = 100.0;

// NeoX RoPE on (i, i + 2) pairs at position p, in double.
void rope(double* x, double p) {
  for (int i = 0; i < 2; ++i) {
    const double theta = p * std::pow(kBase, -2.0 * i / kDim);
    const double a = x[i], b = x[i + 2];
    x[i] = a * std::cos(theta) - b * std::sin(theta);
    x[i + 2] = a * std::sin(theta) + b * std::cos(theta);
  }
}

TEST(ExpectedAttention, KeepsTheEntriesItsFormulaRanksHighest) {
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  // Pre-RoPE queries u[t][h] (with a non-zero mean), keys and values of one KV head.
  std::vector<double> u(kPrompt * kHeads * kDim), keys(kPrompt * kDim), values(kPrompt * kDim);
  for (size_t i = 0; i < u.size(); ++i) u[i] = normal(rng) + (i % kDim == 1 ? 1.5 : 0.0);
  for (double& k : keys) k = normal(rng);
  for (double& v : values) v = normal(rng);

  KvCache cache(1, 1, kDim, 64);
  std::vector<float> kf(keys.begin(), keys.end()), vf(values.begin(), values.end()), q(u.size());
  std::vector<int32_t> positions(kPrompt);
  for (int t = 0; t < kPrompt; ++t) {
    positions[t] = t;
    for (int h = 0; h < kHeads; ++h) {
      double x[kDim];
      std::copy_n(u.begin() + (t * kHeads + h) * kDim, kDim, x);
      rope(x, t);
      std::copy_n(x, kDim, q.begin() + (t * kHeads + h) * kDim);
    }
  }
  cache.append(0, kf.data(), vf.data(), positions.data(), kPrompt);

  auto press = make_press("expected_attention:n_future=16,n_sink=2", KvBudget::per_head(kBudget));
  ThreadPool pool(2);
  const Rotary rotary{kDim, static_cast<float>(kBase), 1.0f, {}, false};
  const std::vector<KvHeadView> kv = {{cache.keys(0, 0), cache.values(0, 0), cache.positions(0, 0), kPrompt}};
  press->on_prefill_begin(0, kPrompt);
  press->on_attention(AttentionEvent{0, kPrompt, positions.data(), q.data(), {kHeads, 1, kDim, 0.5f}, kv, rotary, pool});
  press->on_prefill_end(cache);

  // The formula: mu, Sigma over queries t >= n_sink; R = mean RoPE over [T, T + n_future).
  std::vector<double> rot(kDim * kDim, 0.0);
  for (int p = kPrompt; p < kPrompt + kFuture; ++p) {
    for (int k = 0; k < kDim; ++k) {
      double e[kDim] = {0, 0, 0, 0};
      e[k] = 1;
      rope(e, p);
      for (int i = 0; i < kDim; ++i) rot[i * kDim + k] += e[i] / kFuture;
    }
  }
  std::vector<double> expected(kPrompt, 0.0);
  for (int h = 0; h < kHeads; ++h) {
    double mu[kDim] = {0, 0, 0, 0}, sigma[kDim][kDim] = {};
    const int n = kPrompt - kSinks;
    for (int t = kSinks; t < kPrompt; ++t) {
      for (int a = 0; a < kDim; ++a) mu[a] += u[(t * kHeads + h) * kDim + a] / n;
    }
    for (int t = kSinks; t < kPrompt; ++t) {
      for (int a = 0; a < kDim; ++a) {
        for (int b = 0; b < kDim; ++b) {
          sigma[a][b] += (u[(t * kHeads + h) * kDim + a] - mu[a]) * (u[(t * kHeads + h) * kDim + b] - mu[b]) / n;
        }
      }
    }
    double m[kDim] = {}, s[kDim][kDim] = {};
    for (int i = 0; i < kDim; ++i) {
      for (int a = 0; a < kDim; ++a) m[i] += rot[i * kDim + a] * mu[a];
      for (int k = 0; k < kDim; ++k) {
        for (int a = 0; a < kDim; ++a) {
          for (int b = 0; b < kDim; ++b) s[i][k] += rot[i * kDim + a] * sigma[a][b] * rot[k * kDim + b];
        }
      }
    }
    std::vector<double> z(kPrompt);
    double total = 0;
    for (int j = kSinks; j < kPrompt; ++j) {
      const double* k = &keys[j * kDim];
      double lin = 0, quad = 0;
      for (int i = 0; i < kDim; ++i) {
        lin += m[i] * k[i];
        for (int c = 0; c < kDim; ++c) quad += k[i] * s[i][c] * k[c];
      }
      total += (z[j] = std::exp(lin / std::sqrt(double(kDim)) + quad / (2.0 * kDim)));
    }
    for (int j = kSinks; j < kPrompt; ++j) expected[j] += z[j] / total / kHeads;
  }
  std::vector<std::pair<double, int>> ranked;
  for (int j = kSinks; j < kPrompt; ++j) {
    double norm = 0;
    for (int i = 0; i < kDim; ++i) norm += values[j * kDim + i] * values[j * kDim + i];
    ranked.push_back({-expected[j] * std::sqrt(norm), j});
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int32_t> want = {0, 1};  // the sinks
  for (int i = 0; i < kBudget - kSinks; ++i) want.push_back(ranked[i].second);
  std::sort(want.begin(), want.end());
  ASSERT_EQ(cache.length(0, 0), kBudget);
  EXPECT_EQ(std::vector<int32_t>(cache.positions(0, 0), cache.positions(0, 0) + kBudget), want);
}

}  // namespace
}  // namespace deferkv
