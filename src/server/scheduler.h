#pragma once
// What the HTTP layer asks of whatever runs the model: take a generation request, report
// its tokens and its end through callbacks, cancel it, and say how busy it is. The
// implementation: BatchScheduler, on the library's batch engine (deferkv/batch_engine.h).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/batch_engine.h"
#include "deferkv/error.h"

namespace deferkv::server {

// The prompt, max_tokens, sampling, and the press with the budget it was built with.
using GenerationRequest = SequenceRequest;

// What one request cost, for the response's `usage` object.
struct GenerationUsage {
  int64_t prompt_tokens = 0;  // a context's tokens included
  int64_t cached_tokens = 0;  // of them, those of the compressed context it started from
  int64_t completion_tokens = 0;
  int64_t kv_entries_kept = 0;  // after the last eviction, summed over layers and heads
  int64_t kv_bytes = 0;         // held at the end
  int64_t kv_peak_bytes = 0;
  double capture_ms = 0;
  double eviction_ms = 0;
  double prefill_ms = 0;  // the prompt's forward passes
  double decode_ms = 0;   // the decode steps'
};

// How a generation ended. Only kFinished has a finish reason ("stop", "length"): a request
// stopped for any other cause is reported as an error, never as a normal end.
enum class GenerationEnd {
  kFinished,   // end of generation, max_tokens, a stop string, the context full (`stop` says which)
  kCancelled,  // cancel(id): its client went away
  kShutdown,   // cancel_all(): the server is shutting down
  kFailed,     // an error inside this request (`error`)
};

struct GenerationOutcome {
  GenerationEnd end = GenerationEnd::kFinished;
  StopReason stop = StopReason::kTokenLimit;  // for kFinished
  bool started = false;  // it was admitted and began its prefill (else it ended in the queue)
  std::string error;     // for kFailed
  GenerationUsage usage;
  // SequenceKind::kCompressContext, finished: the context made (the scheduler keeps it).
  std::shared_ptr<const CompressedContext> context;
};

struct GenerationCallbacks {
  // When the request leaves the queue and begins its prefill, on the scheduler's thread
  // (not for one that ends in the queue).
  std::function<void()> on_start;
  // Each generated token, on the scheduler's thread; returning false stops the request
  // (a stop string was met).
  std::function<bool(int32_t token)> on_token;
  // With GenerationRequest::logprobs >= 0: each token's log-probabilities, before its on_token.
  std::function<void(const TokenLogprobs&)> on_logprobs;
  // Called exactly once, last, also for a cancelled or failed request.
  std::function<void(const GenerationOutcome&)> on_finish;
};

// How busy the engine is (/metrics).
using SchedulerStats = BatchEngineStats;

using RequestId = uint64_t;

// Why submit() refused a request; the HTTP layer answers each with its own status
// (docs/serving.md, "Statuses"), so it is a type, never read from the message.
enum class SubmitRefusal {
  kShuttingDown,      // cancel_all() came first (503)
  kQueueFull,         // the waiting queue is at its limit; the client may retry later (429)
  kKvMemoryExceeded,  // its projected KV exceeds the whole capacity: it can never run (400)
};

struct SubmitError : Error {
  SubmitError(SubmitRefusal refusal, const std::string& message) : Error(message), refusal(refusal) {}
  SubmitRefusal refusal;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues the request; throws SubmitError, queueing nothing, for one it refuses. Any other
  // exception is a bug.
  virtual RequestId submit(GenerationRequest request, GenerationCallbacks callbacks) = 0;
  // Stops a waiting or running request within one token; on_finish still runs. Unknown or
  // finished ids are ignored.
  virtual void cancel(RequestId id) = 0;
  // Cancels everything and refuses new requests (shutdown).
  virtual void cancel_all() = 0;
  virtual SchedulerStats stats() const = 0;
  // The context each request runs in (tokens): a prompt must leave room in it.
  virtual int64_t n_ctx() const = 0;

  // The compressed contexts the scheduler keeps (made by kCompressContext requests; their
  // bytes count against its KV memory): BatchEngine's. A scheduler without them keeps none.
  virtual std::shared_ptr<const CompressedContext> find_context(const std::string&) { return nullptr; }
  virtual std::optional<ResidentContext> describe_context(const std::string&) const { return std::nullopt; }
  virtual std::optional<ResidentContext> find_context_prefix(const std::vector<int32_t>&, const std::string&,
                                                             const KvBudget&) {
    return std::nullopt;
  }
  virtual std::vector<ResidentContext> contexts() const { return {}; }
  virtual bool remove_context(const std::string&) { return false; }
};

}  // namespace deferkv::server
