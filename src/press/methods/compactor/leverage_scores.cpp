#include "press/methods/compactor/leverage_scores.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "deferkv/error.h"
#include "kernels/rope.h"
#include "kv/kv_cache.h"

namespace deferkv {

std::vector<double> gaussian_sketch(const SketchSeed& s, int64_t d, int64_t k) {
  std::seed_seq seq{static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.layer), static_cast<uint32_t>(s.kv_head),
                    static_cast<uint32_t>(s.next_position)};
  std::mt19937_64 draws(seq);
  // std::normal_distribution's algorithm is the library's choice; Box-Muller on the
  // standard engine's draws is the same everywhere.
  const double scale = 1.0 / std::sqrt(static_cast<double>(k));
  std::vector<double> phi(static_cast<size_t>(d * k));
  for (double& x : phi) {
    const double u1 = std::ldexp(static_cast<double>((draws() >> 11) + 1), -53);  // (0, 1]: log is finite
    const double u2 = std::ldexp(static_cast<double>(draws() >> 11), -53);
    x = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2) * scale;
  }
  return phi;
}

namespace {

// Lower-triangular L with L L^T = G (k x k, row-major); false if a pivot is not positive.
bool cholesky(const std::vector<double>& g, int64_t k, std::vector<double>& l) {
  l.assign(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double s = g[i * k + j];
      for (int64_t m = 0; m < j; ++m) s -= l[i * k + m] * l[j * k + m];
      if (i == j) {
        if (!(s > 0)) return false;
        l[i * k + i] = std::sqrt(s);
      } else {
        l[i * k + j] = s / l[j * k + j];
      }
    }
  }
  return true;
}

}  // namespace

std::vector<double> leverage_scores(const KvCache& cache, const Rotary& rotary, int64_t layer, int64_t g,
                                    int64_t from, int64_t to, const std::vector<double>& sketch, int64_t k) {
  const int64_t d = cache.head_dim(), n = to - from;
  if (n <= 0) return {};
  // Pre-RoPE keys: the cache holds keys rotated at their positions, and RoPE is a rotation,
  // so rotating back by -position recovers them (up to the cache's storage rounding).
  KvRowReader key(cache.keys(layer, g));
  const int32_t* positions = cache.positions(layer, g);
  std::vector<double> keys(static_cast<size_t>(n * d)), mean(static_cast<size_t>(d), 0.0);
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = key(from + j);
    std::copy(kj, kj + d, row.begin());
    rotary.rotate(row.data(), 1, d, -positions[from + j]);
    for (int64_t i = 0; i < d; ++i) mean[i] += (keys[j * d + i] = row[i]);
  }
  for (double& m : mean) m /= static_cast<double>(n);
  // X = (K - mean) Phi, [n x k].
  std::vector<double> x(static_cast<size_t>(n * k), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < d; ++i) {
      const double c = keys[j * d + i] - mean[i];
      for (int64_t c2 = 0; c2 < k; ++c2) x[j * k + c2] += c * sketch[i * k + c2];
    }
  }
  std::vector<double> gram(static_cast<size_t>(k * k), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < k; ++a) {
      for (int64_t b = 0; b <= a; ++b) gram[a * k + b] += x[j * k + a] * x[j * k + b];
    }
  }
  for (int64_t a = 0; a < k; ++a) {
    for (int64_t b = 0; b < a; ++b) gram[b * k + a] = gram[a * k + b];
  }
  // kvpress's jitter schedule: 1e-2 on the first try (always added: with fewer entries than
  // k the Gram matrix is singular), then tenfold.
  std::vector<double> l;
  double jitter = 1e-2;
  bool factored = false;
  for (int tries = 0; tries < 5 && !factored; ++tries, jitter *= 10) {
    std::vector<double> jittered = gram;
    for (int64_t a = 0; a < k; ++a) jittered[a * k + a] += jitter;
    factored = cholesky(jittered, k, l);
  }
  if (!factored) fail("leverage scores of layer {} KV head {}: the keys' Gram matrix is not finite", layer, g);
  // x^T G^-1 x = ||L^-1 x||^2, by forward substitution: no inverse is formed.
  std::vector<double> scores(static_cast<size_t>(n)), y(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0;
    for (int64_t a = 0; a < k; ++a) {
      double s = x[j * k + a];
      for (int64_t b = 0; b < a; ++b) s -= l[a * k + b] * y[b];
      y[a] = s / l[a * k + a];
      sum += y[a] * y[a];
    }
    scores[j] = std::max(sum, 0.0);
  }
  return scores;
}

void z_normalise_layer(std::vector<std::vector<double>>& scores) {
  double sum = 0;
  int64_t count = 0;
  for (const auto& head : scores) {
    for (double s : head) sum += s;
    count += static_cast<int64_t>(head.size());
  }
  if (count == 0) return;
  const double mean = sum / static_cast<double>(count);
  double squares = 0;
  for (const auto& head : scores) {
    for (double s : head) squares += (s - mean) * (s - mean);
  }
  // One value has no spread (torch gives NaN); the clamp's floor keeps it finite.
  const double sd = count > 1 ? std::sqrt(squares / static_cast<double>(count - 1)) : 0.0;
  const double inv = 1.0 / std::max(sd, 1e-6);
  for (auto& head : scores) {
    for (double& s : head) s = (s - mean) * inv;
  }
}

}  // namespace deferkv
