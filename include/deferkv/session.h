#pragma once
// One conversation with a model: its KV cache, its scratch buffers and the logits of
// the last token fed. Clients (CLI, eval, server) drive a model only through this.
#include <cstdint>
#include <memory>
#include <vector>

#include "deferkv/model.h"

namespace deferkv {

class ThreadPool;
class KvCache;
class ForwardPass;

struct SessionOptions {
  int64_t n_ctx = 0;      // tokens the cache can hold; 0: the model's training context, at most 4096
  int64_t n_batch = 512;  // prompt tokens per forward pass
  bool all_logits = false;  // keep logits of every prompt position (perplexity, analysis)
};

struct SessionTimings {
  double prefill_seconds = 0;
  int64_t prefill_tokens = 0;
  double decode_seconds = 0;
  int64_t decode_tokens = 0;
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
          const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds tokens (a prompt, or more text) at the next positions, n_batch at a time.
  // Throws, leaving the session unchanged, when they do not fit in the context.
  void prefill(const std::vector<int32_t>& tokens);
  // Feeds one token (the last sampled one).
  void decode(int32_t token);

  // Forgets every token at position >= n_past (rollback); later tokens continue from there.
  void truncate(int64_t n_past);

  // Logits of the last token fed ([n_vocab]), or of every prompt position when
  // all_logits was asked ([n_tokens x n_vocab] of the last prefill call).
  const std::vector<float>& logits() const { return logits_; }
  const float* last_logits() const;

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  const KvCache& kv_cache() const { return *cache_; }
  const Model& model() const { return *model_; }
  const SessionTimings& timings() const { return timings_; }

 private:
  std::shared_ptr<const Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  SessionOptions options_;
  int64_t n_ctx_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ForwardPass> forward_;
  std::vector<float> logits_;
  std::vector<int32_t> positions_;
  int64_t n_past_ = 0;
  SessionTimings timings_;
};

}  // namespace deferkv
