#pragma once
// One conversation with a model: its KV cache, its scratch buffers and the logits of
// the last token fed. Clients (CLI, eval, server) drive a model only through this.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/model.h"
#include "deferkv/press.h"

namespace deferkv {

class ThreadPool;
class KvCache;
class ForwardPass;
class ModelReadout;

struct SessionOptions {
  int64_t n_ctx = 0;      // tokens the cache can hold; 0: the model's training context, at most 4096
  int64_t n_batch = 512;  // prompt tokens per forward pass
  bool all_logits = false;  // keep logits of every prompt position (perplexity, analysis)
  // KV-cache storage types of keys and values, as llama.cpp's -ctk/-ctv name them: f32,
  // f16, bf16, q8_0, q4_0 (the quantised ones need a head_dim that is a multiple of 32).
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
};

struct SessionTimings {
  double prefill_seconds = 0;  // includes the press's attention capture during prefill
  int64_t prefill_tokens = 0;
  double decode_seconds = 0;   // includes the press's capture during decode steps
  int64_t decode_tokens = 0;
  double capture_seconds = 0;   // the press's attention capture (part of the above)
  double eviction_seconds = 0;  // the press's hooks that choose and evict
  // The press's lookahead forward passes (LookaheadKV's rows, LAQ's pseudo decoding), the
  // capture during them included; part of eviction_seconds, not of capture_seconds.
  double lookahead_seconds = 0;
};

// The cache right after the last eviction that removed entries.
struct EvictionRecord {
  int64_t decode_step = 0;  // 0: at the end of the prefill
  int64_t n_past = 0;
  std::vector<int64_t> layer_entries;  // summed over the layer's KV heads
  std::vector<int64_t> layer_bytes;
  int64_t bytes = 0;
};

// A saved state of a session (cache, position, logits), for rollback.
struct SessionCheckpoint;

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

  // A copy of the cache, position and logits, and a return to it. The press's own
  // state is not part of it.
  std::shared_ptr<const SessionCheckpoint> checkpoint() const;
  void rollback(const SessionCheckpoint& checkpoint);

  // KV-cache compression: the press sees every layer's attention and evicts at its
  // trigger. nullptr: no compression.
  void set_press(std::unique_ptr<Press> press);
  const Press* press() const { return press_.get(); }
  // A smaller model with the same tokenizer, for presses that draft (SpecKV). Fails,
  // changing nothing, when the vocabularies differ.
  void set_draft_model(std::shared_ptr<const Model> draft);
  // Set once an eviction removed entries.
  const std::optional<EvictionRecord>& last_eviction() const { return last_eviction_; }

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
  int64_t decode_step_ = 0;  // decode steps since the last prefill
  SessionTimings timings_;
  std::unique_ptr<ModelReadout> readout_;  // for a press that reads the model's output path
  std::unique_ptr<Press> press_;
  std::shared_ptr<const Model> draft_model_;
  std::optional<EvictionRecord> last_eviction_;
  bool in_lookahead_ = false;  // the press's capture is then timed as lookahead

  template <typename Hook>
  void run_press_hook(int64_t decode_step, Hook&& hook);
  // Runs prompt tokens through the model in n_batch batches at the next positions.
  void feed(const std::vector<int32_t>& tokens);
  // Hands a press that asks for it a read-out of the model and the final residuals.
  void attach_model_readout(Press* press);
  // The press's lookahead: greedy pseudo-decoding on a saved state (see Press).
  void run_lookahead(int64_t n_tokens);
  // The press's learned lookahead rows after the prompt, then dropped (see Press).
  void feed_lookahead_rows(const LookaheadRows& rows);
  // The press's draft: the draft model continues the prompt; the model reads both.
  void prefill_with_draft(const std::vector<int32_t>& prompt, int64_t n_draft);
};

}  // namespace deferkv
