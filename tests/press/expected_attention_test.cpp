// Expected Attention against a direct double-precision evaluation of its formula, with the
// prompt's query statistics and with statistics read from a file (stats=PATH).
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   the stats file's mean read for the KV head, not the query head
//   (expected_attention.cpp's stats_->mean(layer, g))           -> StatisticsFromAFileReplaceThePrompts,
//                                                                  StatisticsFileDimensionsFollowTheModelsRope
//   the file's covariance left out (a zero Sigma)                  -> the same two
//   the covariance's columns not permuted for interleaved RoPE
//   (query_stats_file.cpp reads block[fa * d + b])                 -> StatisticsFileDimensionsFollowTheModelsRope
//   no dimension permutation at all (file_head_dim returns m)      -> StatisticsFileDimensionsFollowTheModelsRope
//   the shape check not called at on_attach                        -> KeptSetQFilter.FilesForAnotherModel... (its
//                                                                     stats case, kept_set_qfilter_test.cpp)
// The first covariance-column mutant survived a covariance of A A^T / d against a mean of
// norm 2; the statistics are now 1.5 A A^T against a mean of 0.5 N(0, 1), and the tests
// check that the kept set without the covariance differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/press.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/press_test_util.h"
#include "support/scratch_dir.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

constexpr int64_t kDim = 4, kHeads = 2, kPrompt = 24, kBudget = 9, kSinks = 2, kFuture = 16;
constexpr double kBase = 100.0;

// NeoX RoPE on (i, i + 2) pairs at position p, in double; interleaved: on (2i, 2i + 1)
// pairs (a GGUF llama's).
void rope(double* x, double p, bool interleaved = false) {
  for (int i = 0; i < 2; ++i) {
    const double theta = p * std::pow(kBase, -2.0 * i / kDim);
    const int first = interleaved ? 2 * i : i, second = interleaved ? 2 * i + 1 : i + 2;
    const double a = x[first], b = x[second];
    x[first] = a * std::cos(theta) - b * std::sin(theta);
    x[second] = a * std::sin(theta) + b * std::cos(theta);
  }
}

// Per query head: mu [kDim] and Sigma [kDim][kDim] (row-major), pre-RoPE.
struct Moments {
  std::vector<std::vector<double>> mu, sigma;
};

// mu, Sigma of each head over the prompt's pre-RoPE queries u[t][h], t >= n_sink.
Moments prompt_moments(const std::vector<double>& u) {
  Moments out;
  for (int h = 0; h < kHeads; ++h) {
    std::vector<double> mu(kDim, 0.0), sigma(kDim * kDim, 0.0);
    const int n = kPrompt - kSinks;
    for (int t = kSinks; t < kPrompt; ++t) {
      for (int a = 0; a < kDim; ++a) mu[a] += u[(t * kHeads + h) * kDim + a] / n;
    }
    for (int t = kSinks; t < kPrompt; ++t) {
      for (int a = 0; a < kDim; ++a) {
        for (int b = 0; b < kDim; ++b) {
          sigma[a * kDim + b] += (u[(t * kHeads + h) * kDim + a] - mu[a]) * (u[(t * kHeads + h) * kDim + b] - mu[b]) / n;
        }
      }
    }
    out.mu.push_back(mu);
    out.sigma.push_back(sigma);
  }
  return out;
}

// The formula's score of each entry but the first kSinks, from each head's mu and Sigma:
// R = mean RoPE over [next, next + n_future); softmax over the non-sink entries of the
// mean and covariance terms, mean over the heads, times ||v||. keys and values:
// [entry][kDim].
std::vector<double> formula_scores(const Moments& moments, const std::vector<double>& keys,
                                   const std::vector<double>& values, int64_t next, bool interleaved = false) {
  const int n_entries = static_cast<int>(keys.size() / kDim);
  std::vector<double> rot(kDim * kDim, 0.0);
  for (int64_t p = next; p < next + kFuture; ++p) {
    for (int k = 0; k < kDim; ++k) {
      double e[kDim] = {0, 0, 0, 0};
      e[k] = 1;
      rope(e, static_cast<double>(p), interleaved);
      for (int i = 0; i < kDim; ++i) rot[i * kDim + k] += e[i] / kFuture;
    }
  }
  std::vector<double> expected(n_entries, 0.0);
  for (int h = 0; h < kHeads; ++h) {
    const std::vector<double>& mu = moments.mu[h];
    const auto sigma = [&](int a, int b) { return moments.sigma[h][a * kDim + b]; };
    double m[kDim] = {}, s[kDim][kDim] = {};
    for (int i = 0; i < kDim; ++i) {
      for (int a = 0; a < kDim; ++a) m[i] += rot[i * kDim + a] * mu[a];
      for (int k = 0; k < kDim; ++k) {
        for (int a = 0; a < kDim; ++a) {
          for (int b = 0; b < kDim; ++b) s[i][k] += rot[i * kDim + a] * sigma(a, b) * rot[k * kDim + b];
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
  Rotary rotary;

  explicit Prompt(Press& press, bool interleaved = false)
      : rotary{kDim, static_cast<float>(kBase), 1.0f, {}, interleaved} {
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
        rope(x, t, interleaved);
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
  EXPECT_EQ(prompt.kept(), best_by_formula(formula_scores(prompt_moments(prompt.u), prompt.keys, prompt.values, kPrompt)));
}

TEST(ExpectedAttention, EveryNStepsRescoresTheWholeCache) {
  // every=2: the prefill cut to b as above; then after decode step 2 the b entries held
  // and the 2 generated ones are scored again (the prompt's statistics, the future from
  // position T + 2 on) and cut back to b.
  auto press = make_press("expected_attention:n_future=16,n_sink=2,every=2", KvBudget::per_head(kBudget));
  Prompt prompt(*press);
  const std::vector<int32_t> after_prefill = prompt.kept();
  ASSERT_EQ(after_prefill, best_by_formula(formula_scores(prompt_moments(prompt.u), prompt.keys, prompt.values, kPrompt)));
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
  for (int32_t i : best_by_formula(formula_scores(prompt_moments(prompt.u), keys, values, kPrompt + 2))) want.push_back(held[i]);
  EXPECT_EQ(prompt.kept(), want);
  // The generated entries compete with the prompt's.
  EXPECT_NE(want, after_prefill);
}

// Statistics as kvpress's ExpectedAttentionStatsPress publishes them: one layer, a mean
// and a covariance 1.5 A A^T + 0.1 I per query head, in Hugging Face's head dimension
// order. The covariance is large against the mean, so that its term decides part of the
// ranking (checked in the tests: without it the kept set differs).
Moments file_moments() {
  std::mt19937 rng(17);
  std::normal_distribution<double> normal(0.0, 1.0);
  Moments out;
  for (int h = 0; h < kHeads; ++h) {
    std::vector<double> mu(kDim), a(kDim * kDim), sigma(kDim * kDim, 0.0);
    for (int i = 0; i < kDim; ++i) mu[i] = 0.5 * normal(rng);
    for (double& x : a) x = normal(rng);
    for (int i = 0; i < kDim; ++i) {
      for (int j = 0; j < kDim; ++j) {
        for (int k = 0; k < kDim; ++k) sigma[i * kDim + j] += 1.5 * a[i * kDim + k] * a[j * kDim + k];
      }
      sigma[i * kDim + i] += 0.1;
    }
    // Rounded to float32 as the file holds them.
    for (double& x : mu) x = static_cast<float>(x);
    for (double& x : sigma) x = static_cast<float>(x);
    out.mu.push_back(mu);
    out.sigma.push_back(sigma);
  }
  return out;
}

std::string write_stats(const std::string& name, const Moments& m) {
  std::vector<float> mean, cov;
  for (int h = 0; h < kHeads; ++h) {
    mean.insert(mean.end(), m.mu[h].begin(), m.mu[h].end());
    cov.insert(cov.end(), m.sigma[h].begin(), m.sigma[h].end());
  }
  const std::string path = testing::scratch_file(name);
  safetensors_test::write_safetensors(path, {{"format", "pt"}},
                                      {safetensors_test::f32_tensor("query_mean", {1, kHeads, kDim}, mean),
                                       safetensors_test::f32_tensor("query_cov", {1, kHeads, kDim, kDim}, cov)});
  return path;
}

// The moments without their covariance.
Moments without_covariance(Moments m) {
  for (auto& sigma : m.sigma) std::fill(sigma.begin(), sigma.end(), 0.0);
  return m;
}

// The same statistics in a GGUF llama's order: model dimension 2i + h is Hugging Face's
// h * kDim / 2 + i (llama.cpp's converter permutes W_Q and W_K so).
Moments to_interleaved(const Moments& hf) {
  const auto from = [](int m) { return (m % 2 == 0 ? 0 : kDim / 2) + m / 2; };
  Moments out = hf;
  for (int h = 0; h < kHeads; ++h) {
    for (int a = 0; a < kDim; ++a) {
      out.mu[h][a] = hf.mu[h][from(a)];
      for (int b = 0; b < kDim; ++b) out.sigma[h][a * kDim + b] = hf.sigma[h][from(a) * kDim + from(b)];
    }
  }
  return out;
}

TEST(ExpectedAttention, StatisticsFromAFileReplaceThePrompts) {
  const Moments stats = file_moments();
  const std::string path = write_stats("expected-attention-stats.safetensors", stats);
  auto press = make_press("expected_attention:n_future=16,n_sink=2,stats=" + path, KvBudget::per_head(kBudget));
  const Prompt prompt(*press);
  const std::vector<int32_t> want = best_by_formula(formula_scores(stats, prompt.keys, prompt.values, kPrompt));
  EXPECT_EQ(prompt.kept(), want);
  EXPECT_NE(want, best_by_formula(formula_scores(without_covariance(stats), prompt.keys, prompt.values, kPrompt)));
  // The prompt's own statistics rank otherwise: the file's were used.
  EXPECT_NE(want, best_by_formula(formula_scores(prompt_moments(prompt.u), prompt.keys, prompt.values, kPrompt)));
}

TEST(ExpectedAttention, StatisticsFileDimensionsFollowTheModelsRope) {
  // On a model with interleaved RoPE the file's (Hugging Face) dimensions are permuted;
  // with dim_order=model they are taken as they are.
  const Moments stats = file_moments();
  const std::string path = write_stats("expected-attention-stats-llama.safetensors", stats);
  auto press = make_press("expected_attention:n_future=16,n_sink=2,stats=" + path, KvBudget::per_head(kBudget));
  const Prompt prompt(*press, true);
  const std::vector<int32_t> want =
      best_by_formula(formula_scores(to_interleaved(stats), prompt.keys, prompt.values, kPrompt, true));
  EXPECT_EQ(prompt.kept(), want);
  const Moments permuted = to_interleaved(stats);
  EXPECT_NE(want, best_by_formula(formula_scores(without_covariance(permuted), prompt.keys, prompt.values, kPrompt, true)));
  auto as_is = make_press("expected_attention:n_future=16,n_sink=2,dim_order=model,stats=" + path,
                          KvBudget::per_head(kBudget));
  const Prompt unpermuted(*as_is, true);
  const std::vector<int32_t> want_as_is =
      best_by_formula(formula_scores(stats, unpermuted.keys, unpermuted.values, kPrompt, true));
  EXPECT_EQ(unpermuted.kept(), want_as_is);
  EXPECT_NE(want, want_as_is);
}

TEST(ExpectedAttention, StatisticsFileOfTheWrongShapeIsRefusedNamingIt) {
  const auto refused = [](const std::string& spec, const std::vector<std::string>& parts) {
    try {
      make_press(spec, KvBudget::per_head(kBudget));
      ADD_FAILURE() << spec << " was accepted";
    } catch (const Error& e) {
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const std::string path = testing::scratch_file("expected-attention-stats-bad.safetensors");
  safetensors_test::write_safetensors(path, {}, {safetensors_test::f32_tensor("query_mean", {1, 2, 4}, std::vector<float>(8)),
                                                 safetensors_test::f32_tensor("query_cov", {1, 2, 4, 3}, std::vector<float>(24))});
  refused("expected_attention:stats=" + path, {path, "query_cov", "[1, 2, 4, 3]"});
  safetensors_test::write_safetensors(path, {}, {safetensors_test::f32_tensor("query_mean", {2, 4}, std::vector<float>(8))});
  refused("expected_attention:stats=" + path, {path, "query_mean", "2 dimensions"});
  refused("expected_attention:stats=" + path + ",dim_order=gguf", {"dim_order", "gguf"});
  refused("expected_attention:stats=/nonexistent/stats.safetensors", {"/nonexistent/stats.safetensors"});
}

}  // namespace
}  // namespace deferkv
