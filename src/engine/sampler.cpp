#include "deferkv/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "deferkv/error.h"

namespace deferkv {

void SamplerParams::validate() const {
  if (!std::isfinite(temperature)) fail("temperature must be a finite number");
  if (top_p <= 0.0f || top_p > 1.0f) fail("top-p must be in (0, 1], got {}", top_p);
  if (min_p < 0.0f || min_p >= 1.0f) fail("min-p must be in [0, 1), got {}", min_p);
  if (repeat_penalty <= 0.0f) fail("repeat penalty must be positive, got {}", repeat_penalty);
  if (repeat_last_n < 0) fail("repeat-last-n must be >= 0, got {}", repeat_last_n);
}

Sampler::Sampler(const SamplerParams& params) : params_(params) {
  params_.validate();
  seed_ = params.seed == 0xFFFFFFFF ? std::random_device{}() : params.seed;
  rng_.seed(seed_);
}

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n == 0) return;
  recent_.push_back(token);
  while (static_cast<int32_t>(recent_.size()) > params_.repeat_last_n) recent_.pop_front();
}

void Sampler::apply_penalty(std::vector<Candidate>& c) const {
  if (params_.repeat_penalty == 1.0f || recent_.empty()) return;
  std::unordered_set<int32_t> seen(recent_.begin(), recent_.end());
  for (auto& cand : c) {
    if (!seen.count(cand.id)) continue;
    cand.logit = cand.logit > 0 ? cand.logit / params_.repeat_penalty
                                : cand.logit * params_.repeat_penalty;
  }
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab) {
  candidates_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) {
    candidates_[static_cast<size_t>(i)] = {static_cast<int32_t>(i), logits[i], 0.0f};
  }
  apply_penalty(candidates_);
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  if (params_.temperature <= 0.0f) {
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;
  }

  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                    candidates_.end(), by_logit);

  // Filters look at probabilities at temperature 1, as llama.cpp's chain does.
  softmax(candidates_, keep, 1.0f);
  if (params_.top_p < 1.0f) {
    float cumulative = 0.0f;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += candidates_[i].p;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const float threshold = candidates_[0].p * params_.min_p;
    size_t i = 1;
    while (i < keep && candidates_[i].p >= threshold) ++i;
    keep = i;
  }

  softmax(candidates_, keep, params_.temperature);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  double r = uniform(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= candidates_[i].p;
    if (r <= 0.0) return candidates_[i].id;
  }
  return candidates_[keep - 1].id;
}

void Sampler::softmax(std::vector<Candidate>& c, size_t n, float temperature) {
  float max_logit = c[0].logit;
  for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, c[i].logit);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    c[i].p = std::exp((c[i].logit - max_logit) / temperature);
    sum += c[i].p;
  }
  for (size_t i = 0; i < n; ++i) c[i].p = static_cast<float>(c[i].p / sum);
}

TokenLogprobs token_logprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t top) {
  double max = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max = std::max<double>(max, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_norm = max + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(static_cast<double>(logits[id]) - log_norm); };
  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob(token);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const auto k = static_cast<size_t>(std::min<int64_t>(top, n_vocab));
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  }
  return out;
}

}  // namespace deferkv
