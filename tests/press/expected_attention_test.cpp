// Expected Attention against a direct double-precision evaluation of its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/press.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/press_test_util.h"

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

// The formula's score of each entry but the first kSinks, from pre-RoPE queries u[t][h]:
// mu, Sigma over the prompt queries t >= n_sink; R = mean RoPE over [next, next + n_future);
// softmax over the non-sink entries of the mean and covariance terms, mean over the
// heads, times ||v||. keys and values: [entry][kDim].
std::vector<double> formula_scores(const std::vector<double>& u, const std::vector<double>& keys,
                                   const std::vector<double>& values, int64_t next) {
  const int n_entries = static_cast<int>(keys.size() / kDim);
  std::vector<double> rot(kDim * kDim, 0.0);
  for (int64_t p = next; p < next + kFuture; ++p) {
    for (int k = 0; k < kDim; ++k) {
      double e[kDim] = {0, 0, 0, 0};
      e[k] = 1;
      rope(e, static_cast<double>(p));
      for (int i = 0; i < kDim; ++i) rot[i * kDim + k] += e[i] / kFuture;
    }
  }
  std::vector<double> expected(n_entries, 0.0);
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
    std::vector<double> z(n_entries);
    double total = 0;
    for (int j = kSinks; j < n_entries; ++j) {
      const double* k = &keys[j * kDim];
      double lin = 0, quad = 0;
      for (int i = 0; i < kDim; ++i) {
        lin += m[i] * k[i];
        for (int c = 0; c < kDim; ++c) quad += k[i] * s[i][c] * k[c];
      }
      total += (z[j] = std::exp(lin / std::sqrt(double(kDim)) + quad / (2.0 * kDim)));
    }
    for (int j = kSinks; j < n_entries; ++j) expected[j] += z[j] / total / kHeads;
  }
  for (int j = kSinks; j < n_entries; ++j) {
    double norm = 0;
    for (int i = 0; i < kDim; ++i) norm += values[j * kDim + i] * values[j * kDim + i];
    expected[j] *= std::sqrt(norm);
  }
  return expected;
}

// The sinks and the kBudget - kSinks best other entries, as indices.
std::vector<int32_t> best_by_formula(const std::vector<double>& score) {
  std::vector<std::pair<double, int>> ranked;
  for (int j = kSinks; j < static_cast<int>(score.size()); ++j) ranked.push_back({-score[j], j});
  std::sort(ranked.begin(), ranked.end());
  std::vector<int32_t> want = {0, 1};  // the sinks
  for (int i = 0; i < kBudget - kSinks; ++i) want.push_back(ranked[i].second);
  std::sort(want.begin(), want.end());
  return want;
}

// A prompt of one KV head, its queries, and the press that has seen it.
struct Prompt {
  std::vector<double> u, keys, values;  // pre-RoPE queries [t][h][i]; keys, values [t][i]
  KvCache cache{1, 1, kDim, 64};
  ThreadPool pool{2};
  Rotary rotary{kDim, static_cast<float>(kBase), 1.0f, {}, false};

  explicit Prompt(Press& press) {
    std::mt19937 rng(5);
    std::normal_distribution<double> normal(0.0, 1.0);
    // Pre-RoPE queries u[t][h] (with a non-zero mean), keys and values.
    u.resize(kPrompt * kHeads * kDim);
    keys.resize(kPrompt * kDim);
    values.resize(kPrompt * kDim);
    for (size_t i = 0; i < u.size(); ++i) u[i] = normal(rng) + (i % kDim == 1 ? 1.5 : 0.0);
    for (double& k : keys) k = normal(rng);
    for (double& v : values) v = normal(rng);
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
    const std::vector<KvHeadView> kv = {{cache.keys(0, 0), cache.values(0, 0), cache.positions(0, 0), kPrompt}};
    testing::press_prompt_begins(press, cache, 0, kPrompt);
    press.on_attention(AttentionEvent{0, kPrompt, positions.data(), q.data(), {kHeads, 1, kDim, 0.5f}, kv, rotary, pool});
    testing::press_prompt_ends(press, cache);
  }

  std::vector<int32_t> kept() const {
    return std::vector<int32_t>(cache.positions(0, 0), cache.positions(0, 0) + cache.length(0, 0));
  }
};

TEST(ExpectedAttention, KeepsTheEntriesItsFormulaRanksHighest) {
  auto press = make_press("expected_attention:n_future=16,n_sink=2", KvBudget::per_head(kBudget));
  const Prompt prompt(*press);
  ASSERT_EQ(prompt.cache.length(0, 0), kBudget);
  EXPECT_EQ(prompt.kept(), best_by_formula(formula_scores(prompt.u, prompt.keys, prompt.values, kPrompt)));
}

TEST(ExpectedAttention, EveryNStepsRescoresTheWholeCache) {
  // every=2: the prefill cut to b as above; then after decode step 2 the b entries held
  // and the 2 generated ones are scored again (the prompt's statistics, the future from
  // position T + 2 on) and cut back to b.
  auto press = make_press("expected_attention:n_future=16,n_sink=2,every=2", KvBudget::per_head(kBudget));
  Prompt prompt(*press);
  const std::vector<int32_t> after_prefill = prompt.kept();
  ASSERT_EQ(after_prefill, best_by_formula(formula_scores(prompt.u, prompt.keys, prompt.values, kPrompt)));
  std::mt19937 rng(9);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> keys, values;  // of the entries held, in order
  for (int32_t p : after_prefill) {
    keys.insert(keys.end(), prompt.keys.begin() + p * kDim, prompt.keys.begin() + (p + 1) * kDim);
    values.insert(values.end(), prompt.values.begin() + p * kDim, prompt.values.begin() + (p + 1) * kDim);
  }
  std::vector<int32_t> held = after_prefill;
  for (int32_t step = 1; step <= 2; ++step) {
    std::vector<double> k(kDim), v(kDim);
    for (double& x : k) x = normal(rng);
    for (double& x : v) x = normal(rng);
    keys.insert(keys.end(), k.begin(), k.end());
    values.insert(values.end(), v.begin(), v.end());
    const std::vector<float> kf(k.begin(), k.end()), vf(v.begin(), v.end());
    const int32_t position = kPrompt + step - 1;
    held.push_back(position);
    prompt.cache.append(0, kf.data(), vf.data(), &position, 1);
    testing::press_decode_step_ends(*press, prompt.cache, step);
    if (step == 1) EXPECT_EQ(prompt.kept(), held);  // not an evicting step
  }
  std::vector<int32_t> want;
  for (int32_t i : best_by_formula(formula_scores(prompt.u, keys, values, kPrompt + 2))) want.push_back(held[i]);
  EXPECT_EQ(prompt.kept(), want);
  // The generated entries compete with the prompt's.
  EXPECT_NE(want, after_prefill);
}

}  // namespace
}  // namespace deferkv
