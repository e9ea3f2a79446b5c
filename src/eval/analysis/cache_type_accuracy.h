#pragma once
// How far a KV-cache storage type moves the model's predictions (issue 20, "Accuracy"):
// the mean KL divergence KL(p_f32 || p_type) of the next-token distributions of a prompt,
// a session with the type's cache against one with an f32 cache, over every position
// from `skip` on (both fed the same tokens, `chunk` at a time).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deferkv/model.h"

namespace deferkv {
class ThreadPool;
}

namespace deferkv::eval {

struct CacheTypeAccuracy {
  std::string type_k, type_v;
  double mean_kl = 0;   // nats
  double max_kl = 0;
  int64_t positions = 0;
};

// One result per (keys, values) pair of `types`, in order.
std::vector<CacheTypeAccuracy> measure_cache_type_accuracy(const std::shared_ptr<const Model>& model,
                                                           const std::shared_ptr<ThreadPool>& pool,
                                                           const std::vector<int32_t>& tokens,
                                                           const std::vector<std::pair<std::string, std::string>>& types,
                                                           int64_t skip = 256, int64_t chunk = 256);

// KL(p || q) in nats of the softmax distributions of two logit rows of n values.
double kl_of_logits(const float* p_logits, const float* q_logits, int64_t n);

}  // namespace deferkv::eval
