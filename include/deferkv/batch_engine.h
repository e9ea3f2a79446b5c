#pragma once
// Many sequences on one model at once (continuous batching). Each step decodes every
// running sequence's next token in one forward pass, so each weight matrix is read once a
// step for all of them, while each attends over its own ragged, compressed cache. Each
// sequence is a Session of its own, with its own press and budget, sampler and stop
// conditions (as generate() has them), so its tokens are the ones generate() gives it
// alone: its prefill takes the same passes, and a decode step's rows each take the route a
// single token's pass takes (ForwardPass::run over segments).
//
// Sequences join and leave at any step. A prompt is prefilled n_batch tokens a step, one
// sequence's batch per step beside the decode pass, so a long prompt does not stall the
// others. A sequence is admitted, first come first served, when fewer than max_sequences
// run and its projected KV (engine/kv_admission.h) fits beside what the running ones have
// reserved; its reservation shrinks to its budget once its press has evicted, and goes
// when it finishes, admitting waiting ones.
//
// A press's host capabilities (LAQ's greedy lookahead, SpecKV's drafts, LookaheadKV's
// rows) run inside its sequence's own step, through that session's single-sequence forward
// pass, as they do in a Session alone; the other sequences wait for that step.
//
// submit, cancel, cancel_all and stats may be called from any thread; step and
// wait_for_work from one driving thread, on which the callbacks also run.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/compressed_context.h"
#include "deferkv/generate.h"
#include "deferkv/model.h"
#include "deferkv/press.h"
#include "deferkv/sampler.h"
#include "deferkv/session.h"

namespace deferkv {

struct KvProjection;  // engine/kv_admission.h

class ContextStore;
class KvAdmission;

struct BatchEngineOptions {
  int64_t max_sequences = 8;      // running at once (the server's -np)
  int64_t kv_capacity_bytes = 0;  // the KV memory cap (--kv-memory), over all running sequences
  SessionOptions session;         // every sequence's context, prefill batch and cache types
  // Where kept compressed contexts are written and spilled (engine/context_store.h); "" none.
  std::string context_dir;
};

// What a sequence does: generate after its prompt, or compress its prompt into a context
// that the engine keeps (question-agnostic, as CompressedContext::compress; nothing is
// generated).
enum class SequenceKind : uint8_t { kGenerate, kCompressContext };

struct SequenceRequest {
  SequenceKind kind = SequenceKind::kGenerate;
  // kGenerate: the tokens after `context` when one is given (its question), else the prompt.
  // kCompressContext: the context's tokens.
  std::vector<int32_t> prompt;
  // kGenerate: a compressed context the sequence starts from (a copy of its rows; no press
  // then), usually one the engine keeps under `context_id`, which a running sequence keeps
  // from being dropped. kCompressContext: the id the new context is kept under.
  std::shared_ptr<const CompressedContext> context;
  std::string context_id;
  // kGenerate from `context`, non-empty: a sequence that finishes (not cancelled nor failed)
  // leaves a new context kept under this id, `context` extended by the question and the
  // answer tokens its session read (CompressedContext::extend; SequenceOutcome::context).
  std::string extend_context_id;
  int64_t max_tokens = 16;
  bool stop_at_end_of_generation = true;
  SamplerParams sampling;
  std::unique_ptr<Press> press;  // nullptr: the full cache
  KvBudget budget;               // the budget the press was built with (for admission)
  // Log-probabilities of each generated token to report (SequenceCallbacks::on_logprobs):
  // -1 none, 0 the chosen token's, k also the k likeliest tokens of its step.
  int32_t logprobs = -1;
};

struct SequenceOutcome {
  GenerateResult result;
  bool cancelled = false;
  bool started = false;  // it was admitted (on_start ran); false: it ended while waiting
  std::string error;  // non-empty: the sequence failed (its own error only)
  int64_t kv_entries_kept = 0;  // at the end, summed over layers and KV heads
  int64_t kv_bytes = 0;         // held at the end
  int64_t kv_peak_bytes = 0;
  SessionTimings timings;  // decode_seconds counts each whole batched step
  // kCompressContext, or kGenerate with extend_context_id: the context made, kept by the
  // engine under its id (nullptr on failure).
  std::shared_ptr<const CompressedContext> context;
};

// A compressed context the engine keeps (BatchEngine::contexts()).
struct ResidentContext {
  std::string id;
  std::shared_ptr<const CompressedContext> context;  // nullptr: spilled to the context directory
  int64_t running = 0;  // running sequences started from it
};

struct SequenceCallbacks {
  // When the sequence is admitted, before its prefill begins (never for one that ends
  // while it waits).
  std::function<void()> on_start;
  // Each generated token; returning false stops the sequence (StopReason::kCallback).
  std::function<bool(int32_t token)> on_token;
  // With SequenceRequest::logprobs >= 0: each generated token's log-probabilities, just
  // before its on_token.
  std::function<void(const TokenLogprobs&)> on_logprobs;
  // Called exactly once, last, also for a cancelled or failed sequence.
  std::function<void(const SequenceOutcome&)> on_finish;
};

struct BatchEngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t kv_bytes_used = 0;      // held by the running sequences' caches now
  int64_t kv_bytes_reserved = 0;  // what admission has set aside for them
  int64_t kv_bytes_capacity = 0;
  // Running sequences whose press holds a candidate pool (DeferKV's pool=P: cut at the
  // prompt, the budget chosen at step d), and the KV bytes their caches hold now.
  int64_t pooled = 0;
  int64_t kv_bytes_pooled = 0;
  int64_t decode_steps = 0;       // batched decode passes so far
  int64_t decoded_rows = 0;       // tokens they decoded (their batch sizes' sum)
  int64_t contexts_resident = 0;  // compressed contexts kept (removed ones still in use included)
  int64_t context_bytes = 0;      // their bytes, part of kv_bytes_reserved
  int64_t context_hits = 0;       // find_context() calls that found one
  int64_t context_misses = 0;     // and that did not
  int64_t contexts_dropped = 0;   // idle ones dropped (or spilled, with a context directory) for memory
  int64_t contexts_spilled = 0;   // on disk only (context directory)
  int64_t context_loads = 0;      // spilled ones loaded back
};

using SequenceId = uint64_t;

class BatchEngine {
 public:
  BatchEngine(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
              const BatchEngineOptions& options);
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Queues a sequence; throws an Error, queueing nothing, for one that can never be
  // admitted (its projected KV exceeds the whole capacity) or after cancel_all. A request
  // with max_tokens < 0 (up to the context's end) is projected as generating to the
  // context's end; when that could never fit the capacity, it is given the most tokens
  // that can (it then stops with kTokenLimit), so leaving max_tokens out is never refused
  // for the KV memory alone.
  SequenceId submit(SequenceRequest request, SequenceCallbacks callbacks);
  // Stops a waiting or running sequence before its next step, freeing its KV; on_finish
  // still runs. Unknown or finished ids are ignored.
  void cancel(SequenceId id);
  // Cancels everything and refuses new sequences (shutdown).
  void cancel_all();
  BatchEngineStats stats() const;

  // The compressed contexts the engine keeps: made by kCompressContext sequences, counted
  // against the KV capacity, dropped least recently used (idle ones only) when a waiting
  // sequence needs their memory (engine/context_store.h).
  // The context kept under `id`, or nullptr (counted as a hit or a miss).
  std::shared_ptr<const CompressedContext> find_context(const std::string& id);
  std::optional<ResidentContext> describe_context(const std::string& id) const;
  // The longest kept context whose tokens begin `prompt`, made with `press` (describe(), or
  // "full") and `budget`, question-agnostic; counted as a hit. Spilled ones, and ones loaded
  // back from the context directory, are not searched.
  std::optional<ResidentContext> find_context_prefix(const std::vector<int32_t>& prompt, const std::string& press,
                                                     const KvBudget& budget);
  std::vector<ResidentContext> contexts() const;  // oldest first
  // Forgets `id`: its memory is freed now, or when the last running sequence using it ends.
  // False when there is none.
  bool remove_context(const std::string& id);

  // One step: finishes cancelled sequences, admits what fits, feeds one prefill batch and
  // decodes every sequence that has a token to feed, in one pass. False when there was
  // nothing to do.
  bool step();
  // Blocks until there is a sequence to step; false once cancel_all was called and none is left.
  bool wait_for_work();

  // One token's KV over every layer and KV head, in the sessions' storage types.
  int64_t kv_bytes_per_token() const { return bytes_per_token_; }
  int64_t n_ctx() const { return n_ctx_; }

 private:
  struct Sequence;
  KvProjection project_request(const SequenceRequest& request, const PressHolding& holding, int64_t new_tokens) const;
  // Moves admissible waiting sequences to running_ (mutex_ held) and returns them; the
  // cancelled waiting ones leave the queue into `cancelled`.
  std::vector<std::shared_ptr<Sequence>> admit(std::vector<std::shared_ptr<Sequence>>& cancelled);
  // Opens the sequence's session and begins its prefill.
  void start(Sequence& s);
  // Feeds the first sequence still prefilling the work of one n_batch through every layer
  // (Session::feed_prompt); false when none is prefilling.
  bool prefill_step();
  // One forward pass over every sequence with a token to feed; false when none has.
  bool decode_all();
  // Takes the finished sequences out of running_, freeing their reservations, and tells
  // their clients; false when none had finished.
  bool reap_finished();
  // Samples the sequence's next token; finishes it when it stops.
  void advance(Sequence& s);
  // Records the sequence's KV bytes; shrinks its reservation once its press has evicted.
  void after_forward(Sequence& s);
  // Ends the sequence and closes its session (its KV is freed); reap_finished tells its client.
  void finish(Sequence& s, const std::string& error = {});

  std::shared_ptr<const Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  BatchEngineOptions options_;
  int64_t bytes_per_token_ = 0;
  int64_t n_ctx_ = 0;
  std::unique_ptr<ForwardPass> forward_;  // the decode steps', max_sequences rows

  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::unique_ptr<KvAdmission> admission_;
  std::unique_ptr<ContextStore> contexts_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::vector<std::shared_ptr<Sequence>> running_;
  SequenceId next_id_ = 1;
  bool stopping_ = false;
  int64_t decode_steps_ = 0;  // guarded by mutex_, as the two above
  int64_t decoded_rows_ = 0;
};

}  // namespace deferkv
