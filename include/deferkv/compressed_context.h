#pragma once
// A compressed context: a document prefilled and compressed once, kept as an immutable
// value that any number of sessions start from, each reading its own question after it
// (compress once, answer many; issue 44). It holds every layer's and KV head's kept rows
// in the cache's storage types with their positions, the context's tokens and the logits
// of its last one, and what it was made with: the model's identity (the SHA-256 of its
// file), the press (Press::describe()), the cache types and the mode.
//
//   auto ctx = CompressedContext::compress(session, document);   // session has the press
//   Session s(model, pool);                 // no press: the context's has done its work
//   generate(s, *ctx, question, options, sampler);   // or start_session(s, *ctx) and on
//   ctx->save("doc.dkvctx");  CompressedContext::load("doc.dkvctx", *model);
//
// The file format: docs/compressed_context.md.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/generate.h"
#include "deferkv/model.h"
#include "deferkv/press.h"
#include "deferkv/session.h"

namespace deferkv {

// How the context was compressed: alone, before any question (kvpress's default, what
// compress() does), or with a question at its end that the press saw (its window), or
// deferred: alone, to its candidate pool, with the eviction left to each question's decode
// step d (deferkv: Press::deferred_eviction; each session that starts from it resumes the
// press and chooses its own kept set).
enum class ContextMode : uint8_t { kQuestionAgnostic = 0, kQuestionAware = 1, kDeferred = 2 };
const char* context_mode_name(ContextMode mode);

class CompressedContext {
 public:
  // The engine's part: the cache's rows (engine/compressed_context_state.h).
  struct State;

  // Prefills `tokens` on `session` (idle, nothing fed yet, its press set or none) and keeps
  // the cache as the press left it at the prefill's end. The session stays there, so it may
  // go on with Session::prefill_question as compress/answer does. question_tokens > 0: the
  // last that many tokens are a question the press sees (question-aware; its window), and
  // they stay part of the context. Refuses a press that evicts after the prefill
  // (press_evicts_after_prefill: per-step and decode-time presses): what it keeps depends
  // on what is read later, which a context shared by many questions cannot hold. The one
  // exception is a press that resumes (press_resumes_deferred: deferkv, any pool): the
  // context is deferred (ContextMode::kDeferred), holding the press's pool and its window's
  // scores, and each question evicts at its own step d (question_tokens > 0: the question
  // at its end is in the window whose scores it holds, as one session would have it).
  static std::shared_ptr<const CompressedContext> compress(Session& session, const std::vector<int32_t>& tokens,
                                                           int64_t question_tokens = 0);

  // compress() without the prefill: keeps the cache of `session`, which has just prefilled
  // `tokens` from its start (with `question_tokens` as compress() has them) and nothing
  // more. The batch engine prefills a context a batch a step beside other sequences, then
  // captures it here. Refuses the same presses compress() refuses.
  static std::shared_ptr<const CompressedContext> capture(const Session& session, const std::vector<int32_t>& tokens,
                                                          int64_t question_tokens = 0);

  // A new context: `base` followed by `appended`, the tokens `session` has read since it
  // started from base (start_session: a turn's question and the answer tokens it decoded),
  // appended uncompressed; the press, cache types and mode are base's. A multi-turn chat
  // extends its context each turn and so reads the document once (the server's
  // kv_context_extend). [OUR FORMULATION] The grown context is never compressed again:
  // docs/serving.md says why. Fails unless the session holds base's positions and exactly
  // `appended` after them. A deferred base: the session's press must have evicted (its
  // step d came in the turn), and the new context holds that cache, question-agnostic: the
  // conversation goes on where this turn's choice left it, as one session would.
  static std::shared_ptr<const CompressedContext> extend(const Session& session, const CompressedContext& base,
                                                         const std::vector<int32_t>& appended);

  // Reads a file written by save(), checked on its own (magic, version, checksum, every
  // count against the file's size): errors name the file and what is wrong.
  static std::shared_ptr<const CompressedContext> read(const std::string& path);
  // read(), then refused unless it was made for `model` (its file's SHA-256 and shape).
  static std::shared_ptr<const CompressedContext> load(const std::string& path, const Model& model);
  // Writes the context to `path` atomically (a temporary file beside it, then a rename).
  void save(const std::string& path) const;

  // Fails, naming both, unless the context was made with this press (a describe() string,
  // "full" for none) and these cache types (llama.cpp's names: f16, q8_0, ...).
  void check_made_with(const std::string& press, const std::string& cache_type_k,
                       const std::string& cache_type_v) const;
  // For a deferred context: fails, naming both, unless it was made with this budget (each
  // question chooses the context's budget at its step d); nothing for any other context.
  void check_deferred_budget(const KvBudget& budget) const;
  // Fails, naming the mismatch, unless sessions of `model` can start from the context.
  void check_model(const Model& model) const;

  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::string& model_sha256() const { return model_sha256_; }
  const std::string& press() const { return press_; }  // "full" when none was set
  const std::string& cache_type_k() const { return cache_type_k_; }
  const std::string& cache_type_v() const { return cache_type_v_; }
  ContextMode mode() const { return mode_; }
  int64_t n_past() const { return n_past_; }  // where the question goes (after re-rotation: the kept count)
  int64_t kept_entries() const;               // summed over every layer and KV head
  int64_t bytes() const;  // rows and positions held, as KvStats counts them, and a deferred one's scores
  // A deferred context's press state (its budget, prompt end, window scores); nullptr else.
  const DeferredEviction* deferred() const { return deferred_ ? &*deferred_ : nullptr; }
  const State& state() const { return *state_; }

  CompressedContext(const CompressedContext&) = delete;
  CompressedContext& operator=(const CompressedContext&) = delete;
  ~CompressedContext();

 private:
  CompressedContext();
  std::vector<int32_t> tokens_;
  std::string model_sha256_;
  std::string press_;
  std::string cache_type_k_, cache_type_v_;
  ContextMode mode_ = ContextMode::kQuestionAgnostic;
  int64_t n_past_ = 0;
  std::optional<DeferredEviction> deferred_;  // ContextMode::kDeferred only
  std::unique_ptr<State> state_;
};

// Puts a fresh session (idle, nothing fed, no press) where the context left its own: a copy
// of the rows, the position and the last logits; for a deferred context also the press,
// rebuilt from its description and budget and resumed waiting for decode step d. Then Session::prefill_question reads a
// question, or decode() goes on from the context's last token. Fails, naming the mismatch,
// for a session of another model or cache types, one whose context cannot hold it, or one
// with a press set (the context's press has done its work; a second one would not see the
// prompt it expects).
void start_session(Session& session, const CompressedContext& context);

// start_session, the question read on it (Session::prefill_question), then the decode loop
// as generate() runs it; the sampler has seen the context's and the question's tokens.
GenerateResult generate(Session& session, const CompressedContext& context, const std::vector<int32_t>& question,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace deferkv
