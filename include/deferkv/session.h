#pragma once
// One conversation with a model: its KV cache, its scratch buffers and the logits of
// the last token fed. Clients (CLI, eval, server) drive a model only through this.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "deferkv/model.h"
#include "deferkv/press.h"

namespace deferkv {

class ThreadPool;
class KvCache;
class ForwardPass;
struct ForwardSegment;
class ModelReadout;
struct AttentionEvent;
struct ResidualEvent;
enum class PassPhase : uint8_t;

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
  double prefill_seconds = 0;  // the prompt's forward passes, the press's capture during them included
  int64_t prefill_tokens = 0;
  double decode_seconds = 0;   // includes the press's capture during decode steps
  int64_t decode_tokens = 0;
  double capture_seconds = 0;   // the press's attention capture (part of the above)
  double eviction_seconds = 0;  // the press's points that choose and evict
  // The forward passes the press asked for (LAQ's pseudo decoding, SpecKV's draft and its
  // re-fed last token, LookaheadKV's rows), the capture during them included; part of
  // eviction_seconds, not of capture_seconds.
  double lookahead_seconds = 0;
};

// The KV cache as it is now: its shape and storage types, and the bytes it holds (keys and
// values in their storage types, and each entry's int32 position).
struct KvLayerStats {
  int64_t entries = 0;  // summed over the layer's KV heads
  int64_t bytes = 0;
  int64_t peak_bytes = 0;  // the most this layer held at once
};
struct KvStats {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  std::string cache_type_k, cache_type_v;  // llama.cpp's names (f16, q8_0, ...)
  int64_t key_row_bytes = 0;    // one entry's key in one KV head
  int64_t value_row_bytes = 0;  // its value
  int64_t bytes_per_entry = 0;  // key + value + position
  int64_t bytes = 0;            // held now
  int64_t peak_bytes = 0;       // the most held at once
  std::vector<KvLayerStats> layers;
  std::vector<int64_t> entries;  // [n_layer * n_head_kv], entries each head holds now
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

// Where a session stands (engine/session_phase.h).
enum class SessionPhase : uint8_t;

// The model's shape as a press sees it (Press::on_attach, Press::holding).
PressModelShape press_shape(const ModelConfig& c);

class Session {
 public:
  friend struct SessionInternals;  // the cache itself, for the engine and tests (engine/session_internals.h)

  Session(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
          const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds tokens (a prompt, or more text) at the next positions, n_batch at a time.
  // Throws, leaving the session unchanged, when they do not fit in the context.
  // question_tokens: how many of the last tokens are the prompt's question, for a press
  // whose window is the question (PressAt::question_tokens at kPromptBegin); 0: not given.
  void prefill(const std::vector<int32_t>& tokens, int64_t question_tokens = 0);
  // Question-agnostic mode: feeds a question after the context that prefill() has just fed
  // (and the press compressed at its end), on the cache as the press left it. The press's
  // prompt stays the context (PressPoint::kQuestion): no prompt point runs for the question,
  // its entries are kept, and decode steps count from its end. Throws, leaving the session
  // unchanged, when it does not fit or nothing was prefilled before it.
  void prefill_question(const std::vector<int32_t>& tokens);
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
  // The positions the press runs after a prompt of n_tokens (LookaheadKV's rows, KVzip's
  // reconstruction; 0 for most presses): a prefill needs them free in the context too.
  int64_t press_positions_after_prompt(int64_t n_tokens) const;
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
  KvStats kv_stats() const;
  const Model& model() const { return *model_; }
  const SessionTimings& timings() const { return timings_; }

  // The engine's steps of a prefill and a decode step, one at a time
  // (engine/session_driver.h): the batch engine runs several sessions' decode steps in one
  // forward pass, between the feeds of a prompt.
  class Driver;

 private:
  // The press's side of the session: the capabilities it may call (PressHost), what it
  // declared at on_attach, and the points it acts at (Press::points, read once there).
  class Host;
  struct PressNeeds {
    PressPoints points;
    int64_t reserved_after_prompt = 0;
    int64_t prompt_length_after_prompt = 0;  // up to this many more, as many as the prompt's tokens
    bool drafts = false;
    std::unique_ptr<ModelReadout> readout;
    std::vector<std::function<void(const ResidualEvent&)>> residual_observers;
  };

  // The phases (SessionPhase, in this order), each with what only it needs. Each call checks
  // the phase it starts from (expect_phase) and sets the one it leaves the session in, on an
  // error too.
  struct Idle {};
  struct Attaching {
    PressNeeds* needs;  // the press's declarations, taking the place of the last press's once it is in
  };
  struct Prefilling {
    int64_t first_position = 0;
    size_t next = 0;          // without a press: the next batch's first token
    bool evicted = false;     // a layer lost entries at its end
  };
  struct PromptComplete {
    bool evicted = false;  // Prefilling's: end_prefill records the cache when a layer lost entries
  };
  struct PromptEnd {
    const std::vector<int32_t>* tokens;  // the prompt, for the capabilities that feed it again
  };
  struct Capability {  // inside PromptEnd, which it returns to
    const std::function<void(const AttentionEvent&)>* observer;  // null: the press's on_attention
  };
  struct Question {};
  struct Decoding {
    int32_t position = 0;  // of the token being decoded: the step's segment points at it
    bool evicted = false;  // a layer lost entries as it finished (PressPoint::kDecodeLayerEnd)
  };
  using Phase = std::variant<Idle, Attaching, Prefilling, PromptComplete, PromptEnd, Capability, Question, Decoding>;

  SessionPhase phase() const;
  // Refuses a call (`call`, as its caller knows it) unless the session is in one of `allowed`.
  void expect_phase(const char* call, std::initializer_list<SessionPhase> allowed) const;

  // The steps of prefill() and decode(), which the batch engine runs through Driver.
  //
  // prefill() is begin_prefill(), feed_prompt() until it returns true, and end_prefill(), so
  // that a driver can run other sequences between the feeds.
  void begin_prefill(const std::vector<int32_t>& tokens, int64_t question_tokens = 0);
  // Runs about `layer_rows` rows x layers more of the prompt begun, timed as prefill (the
  // press's layer evictions as eviction); true once the whole prompt is in. Without a press,
  // n_batch tokens at a time through every layer (at least one batch per call). With one,
  // layer by layer (ForwardPass::begin_prompt), n_batch tokens through one layer at a time,
  // each layer handed to the press (PressPoint::kPromptLayerEnd) once the whole prompt has
  // passed it. On an error the prompt's entries are taken back out and it throws.
  bool feed_prompt(const std::vector<int32_t>& tokens, int64_t layer_rows);
  // The press's end of the prefill.
  void end_prefill(const std::vector<int32_t>& tokens);
  // decode() is decode_segment(), that segment's forward pass, end_decode(). `token` must
  // outlive the pass.
  ForwardSegment decode_segment(const int32_t& token);
  void end_decode(double seconds);
  // A step's forward pass failed: back to idle, as if the step had not begun.
  void abandon_decode();
  // Layer `layer` of the prompt (ForwardPass::run_prompt_chunk) or of the decode step
  // (ForwardSegment::layer_done) running is done: the press's kPromptLayerEnd or
  // kDecodeLayerEnd, timed as eviction.
  void prompt_layer_done(int64_t layer);
  void decode_layer_done(int64_t layer);
  // The forward pass's taps for the press set (none without one): its attention and, when
  // it asked, the final residual stream.
  void set_taps();
  // Whether a press is set that acts at `point`: the session calls it there, and nowhere else.
  bool acts_at(PressPoint point) const { return press_ && needs_.points.has(point); }

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
  std::unique_ptr<Press> press_;
  std::shared_ptr<const Model> draft_model_;
  std::optional<EvictionRecord> last_eviction_;
  std::unique_ptr<Host> host_;
  PressNeeds needs_;  // the press's, while it is set
  Phase phase_;
  // Set on a decode step's segment while a press is set: decode_layer_done.
  std::function<void(int64_t)> decode_layer_done_;

  // Runs a press's point timed as eviction; records the cache when it (or, `evicted_before`,
  // the prefill's layer evictions before it) removed entries.
  template <typename Hook>
  void run_press_hook(int64_t decode_step, Hook&& hook, bool evicted_before = false);
  // Refuses tokens (`what`: "prompt", "question") that are empty, out of the vocabulary or
  // do not fit in the context.
  void check_input(const std::vector<int32_t>& tokens, const char* what) const;
  // Runs tokens (a question, a token fed again) through the model at the next positions,
  // untimed, their attention events stamped `phase`. With a press set, layer by layer
  // (ForwardPass::run_prompt); without one, n_batch batch by batch, holding no residual
  // stream of the whole prompt.
  void feed(const std::vector<int32_t>& tokens, PassPhase phase);
  // For a layer-by-layer run of tokens at the next positions: positions_ set, logits_ sized
  // for every row when all_logits. Returns the number of tokens.
  int64_t prepare_prompt_rows(const std::vector<int32_t>& tokens);
  // The n_batch tokens from `begin` through every layer, untimed; returns where the next
  // batch begins.
  size_t run_batch(const std::vector<int32_t>& tokens, size_t begin);
  // Refuses a token id outside the vocabulary (it would index past the embedding table).
  void check_token(int32_t token) const;
  // Refuses a prefill of n_tokens that the press's declarations rule out.
  void check_press_needs(int64_t n_tokens) const;
};

}  // namespace deferkv
