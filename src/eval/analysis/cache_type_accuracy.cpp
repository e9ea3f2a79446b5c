#include "eval/analysis/cache_type_accuracy.h"

#include <algorithm>
#include <cmath>

#include "deferkv/error.h"
#include "deferkv/session.h"

namespace deferkv::eval {
namespace {

// log softmax of a logit row, in double.
std::vector<double> log_softmax(const float* logits, int64_t n) {
  const double max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  const double log_sum = max + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
  return out;
}

std::unique_ptr<Session> session_with(const std::shared_ptr<const Model>& model, const std::shared_ptr<ThreadPool>& pool,
                                      int64_t n_ctx, int64_t chunk, const std::string& k, const std::string& v) {
  SessionOptions options;
  options.n_ctx = n_ctx;
  options.n_batch = chunk;
  options.all_logits = true;
  options.cache_type_k = k;
  options.cache_type_v = v;
  return std::make_unique<Session>(model, pool, options);
}

}  // namespace

double kl_of_logits(const float* p_logits, const float* q_logits, int64_t n) {
  const std::vector<double> log_p = log_softmax(p_logits, n), log_q = log_softmax(q_logits, n);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
  return std::max(0.0, kl);
}

std::vector<CacheTypeAccuracy> measure_cache_type_accuracy(const std::shared_ptr<const Model>& model,
                                                           const std::shared_ptr<ThreadPool>& pool,
                                                           const std::vector<int32_t>& tokens,
                                                           const std::vector<std::pair<std::string, std::string>>& types,
                                                           int64_t skip, int64_t chunk) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (skip < 0 || skip >= n_tokens) fail("the prompt has {} tokens: none is left after skipping {}", n_tokens, skip);
  if (chunk <= 0) fail("chunk must be positive, got {}", chunk);
  const int64_t n_vocab = model->config().n_vocab;
  auto reference = session_with(model, pool, n_tokens, chunk, "f32", "f32");
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<CacheTypeAccuracy> results;
  for (const auto& [k, v] : types) {
    sessions.push_back(session_with(model, pool, n_tokens, chunk, k, v));
    results.push_back({k, v, 0, 0, 0});
  }
  // Chunk by chunk, so only one chunk's logits per session are held.
  for (int64_t begin = 0; begin < n_tokens; begin += chunk) {
    const std::vector<int32_t> part(tokens.begin() + begin, tokens.begin() + std::min(n_tokens, begin + chunk));
    reference->prefill(part);
    for (size_t s = 0; s < sessions.size(); ++s) {
      sessions[s]->prefill(part);
      for (size_t i = 0; i < part.size(); ++i) {
        if (begin + static_cast<int64_t>(i) < skip) continue;
        const double kl = kl_of_logits(reference->logits().data() + i * n_vocab,
                                       sessions[s]->logits().data() + i * n_vocab, n_vocab);
        results[s].mean_kl += kl;
        results[s].max_kl = std::max(results[s].max_kl, kl);
        ++results[s].positions;
      }
    }
  }
  for (auto& r : results) r.mean_kl /= static_cast<double>(r.positions);
  return results;
}

}  // namespace deferkv::eval
