#pragma once
// KV-cache compression ("presses"): policy objects that observe the attention and that a
// Session calls at the points each declares (PressPoint: a prompt's layers and its end, a
// decode step's layers and its end), evicting cache entries through KvCache. Build one from a parameter string:
//
//   auto press = make_press("deferkv:d=1,eta=0.7,base=adakv", KvBudget::per_head(128));
//   session.set_press(std::move(press));
//
// Presses compose with '+', each called at its points in turn, e.g. a prefill press and a
// decode-time one: "snapkv+moment_kv:decode_budget=512" (the rules: make_press below).
//
// press_catalogue() lists every method with its parameters, defaults and paper.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deferkv {

class KvCache;
class ModelReadout;
struct AttentionEvent;
struct LookaheadRows;
struct ResidualEvent;

// How many prompt entries each (layer, KV head) keeps on average. The papers'
// "B_total = 128L" is per_head(128); kvpress's compression ratio r keeps
// int(T * (1 - r)) of a T-token prompt.
class KvBudget {
 public:
  static KvBudget per_head(int64_t entries);
  static KvBudget ratio(double compression_ratio);
  KvBudget() = default;  // none given (presses that need one refuse it)

  // Entries per KV head for a prompt of `prompt_tokens`.
  int64_t resolve(int64_t prompt_tokens) const;
  bool is_ratio() const { return ratio_ >= 0; }
  bool is_set() const { return per_head_ > 0 || is_ratio(); }
  int64_t entries_per_head() const { return per_head_; }  // 0 for a ratio or none
  double compression_ratio() const { return ratio_; }     // < 0 unless a ratio
  std::string describe() const;

 private:
  int64_t per_head_ = 0;
  double ratio_ = -1;
};

// The warning every command gives when `budget` keeps a whole prompt of `prompt_tokens`
// (nothing will be evicted), "" when it does not.
std::string budget_covers_prompt_warning(const KvBudget& budget, int64_t prompt_tokens);

// The model shape a press is attached to.
struct PressModelShape {
  int64_t n_layer, n_head, n_head_kv, head_dim;
  int64_t n_embd = 0, n_ff = 0;  // hidden and feed-forward widths
};

// What a press holds per KV head, beyond what its points() and budget say (Press::holding).
struct PressHolding {
  // A press that cuts each layer of a prompt, as the prompt passes it, to a candidate pool
  // larger than its budget and chooses the budget from it later (DeferKV's pool=P: a
  // deferred eviction): the pool's entries per KV head, held beside one layer's whole prompt
  // until it evicts. -1: no pool (the whole prompt until it evicts, or each layer cut to its
  // budget as the prompt passes it).
  int64_t pool = -1;
  // Once it has evicted: entries per KV head, the mean over every layer and head, when that
  // is not its budget: a press that keeps some layers or heads whole (SimLayerKV's busy
  // layers, DuoAttention's retrieval heads) or a share of each layer's prompt whatever the
  // budget (alloc=per_layer). -1: its budget.
  int64_t kept = -1;
};

// A press whose one eviction waits for decode step d, as it stands at the end of a prompt
// (Press::deferred_eviction): what another press built from the same description needs to
// resume there, on a cache that holds the same entries (a deferred compressed context:
// docs/compressed_context.md). DeferKV's fused score at step d is the prompt window's share
// (the window's attention, already weighted by its temporal weights, which depend on d only,
// fixed by the description) plus the decode steps' shares, over one normaliser: the window's
// share, stored, and the decode steps' of the question that resumes it, added then, make the
// fused score one session would have computed.
struct DeferredEviction {
  KvBudget budget;          // the press's
  int64_t prompt_end = 0;   // T: the prompt's positions (its budget is resolved for T)
  // Per layer and KV head (layer-major, as KvCache::snapshot lists heads): the positions
  // of the entries the press has scores for, ascending, and its captured share of the
  // score of each.
  std::vector<std::vector<int32_t>> positions;
  std::vector<std::vector<float>> scores;
};

// How a prompt frames its text: `opening` before it (BOS where the vocabulary adds one; in
// the chat form also a system turn and the user's header), `closing` after it (in the chat
// form the end of the user's turn and the assistant's header; empty for a plain prompt).
struct PromptFrame {
  enum class Form { kChat, kPlain };
  Form form;
  std::vector<int32_t> opening;
  std::vector<int32_t> closing;
};

// What the engine offers a press beyond observation. The session hands its host to
// on_attach; it stays valid while the press is set on the session. A press calls only
// what its method needs, and no other press pays for it. Forward passes a capability
// runs for a press show their attention to the observer given with the call, never to
// on_attention (nor to the other presses of a composition).
class PressHost {
 public:
  using AttentionObserver = std::function<void(const AttentionEvent&)>;
  using ResidualObserver = std::function<void(const ResidualEvent&)>;

  // Declarations, in on_attach. Their checks then run when a prefill starts, before any
  // point, so that a refused prefill leaves the session and every press as they were.
  //
  // Every prefill must leave room for n positions after the prompt (run_after_prompt).
  virtual void reserve_after_prompt(int64_t n_positions) = 0;
  // ... and, beyond those, for as many positions as the prompt has tokens, up to `at_most`
  // (the prompt run again after itself in pieces of at_most: KVzip's reconstruction).
  virtual void reserve_prompt_length_after_prompt(int64_t at_most) = 0;
  // The press drafts (draft()): a prefill is refused unless the session has a draft model,
  // it is the session's first prompt and all_logits is off.
  virtual void use_draft_model() = 0;
  // The model's output path (model_readout.h: W_O, the final norm, the LM head); from
  // this call on the final residual stream of every forward pass also goes to `observe`
  // (none when `observe` is empty).
  virtual const ModelReadout& read_model_output(ResidualObserver observe) = 0;

  // The model's text, at any time: a press that writes a request to the model (KVzip's
  // "repeat the context") encodes it here and frames it as the prompt is framed.
  //
  // The model's tokens for `text`, without BOS; special tokens are not parsed.
  virtual std::vector<int32_t> encode_text(const std::string& text) = 0;
  // The frames a prompt may have around its text, the model's chat form first (when deferkv
  // knows the model's chat template), then the plain one.
  virtual std::vector<PromptFrame> prompt_frames() = 0;
  // The model's GGUF file, at any time: a press whose artifact was trained for one model
  // finds it beside the file when its description names none (LookaheadKV's weights).
  virtual const std::string& model_path() = 0;

  // Capabilities, at PressPoint::kPromptEnd.
  //
  // The tokens of the prompt just prefilled.
  virtual const std::vector<int32_t>& prompt_tokens() = 0;
  //
  // Greedy lookahead (LAQ): saves the session's state, lets `prepare` change the working
  // cache (e.g. compress it), runs up to n greedy decode steps from the prefill's logits
  // on it (stopping at end of generation or a full context) while `observe` sees their
  // attention, then puts the cache and logits back.
  virtual void greedy_lookahead(int64_t n_tokens, const std::function<void(KvCache&)>& prepare,
                                const AttentionObserver& observe) = 0;
  // The draft model's greedy continuation of the prompt just prefilled: up to n tokens,
  // fewer at end of generation or where the context ends (needs use_draft_model()).
  virtual std::vector<int32_t> draft(int64_t n_tokens) = 0;
  // Runs extra input after the prompt at positions T, T+1, ...: token ids (SpecKV's draft)
  // or LookaheadKV's rows (input embeddings with low-rank deltas at those rows only), with
  // `observe` seeing their attention; then drops their entries. The prompt's entries, the
  // session's position and its logits are exactly those of a prefill without them. Rows
  // need reserve_after_prompt(); tokens are cut to the context.
  virtual void run_after_prompt(const std::vector<int32_t>& tokens, const AttentionObserver& observe) = 0;
  virtual void run_after_prompt(const LookaheadRows& rows, const AttentionObserver& observe) = 0;
  // Drops the prompt's last token and feeds it again over the cache as the press left it,
  // so that generation starts from logits that see the compressed cache (SpecKV). Needs
  // all_logits off.
  virtual void refeed_last_token() = 0;
  // Key re-rotation: the press has renumbered every entry of the cache to 0 .. n-1
  // (KvCache::renumber), so the next token goes to `position` = n rather than after the
  // prompt's original positions. Fails unless every head's newest entry lies below it.
  virtual void continue_at(int64_t position) = 0;

 protected:
  ~PressHost() = default;
};

// The points of a session's run at which a press acts. A press declares the points it acts
// at (Press::points()); the session reads the declaration once, when the press is set on
// it, and calls the press at exactly those points, each driver (Session::prefill and
// decode, the batch engine) the same way, in this order for every prompt and decode step:
//
//   kPromptBegin, then kPromptLayerEnd for layers 0, 1, ..., n_layer - 1, then kPromptEnd;
//   kQuestion (Session::prefill_question), between a prompt and its first decode step;
//   for each decode step: kDecodeLayerEnd for layers 0 .. n_layer - 1, then kDecodeStep.
//
// A point the press did not declare is never called, so there is no answer to give back
// and no work that one driver hands over and another does not. Layer ends come each once,
// in order, before their end; in a composition, behind a part that acts at the end, they
// come all together just before that end (make_press).
enum class PressPoint : uint8_t {
  // A prefill of n_tokens starting at first_position begins (before its attention).
  kPromptBegin,
  // Layer `layer` of the prompt is complete: every prompt row has passed it (its attention
  // has been observed) and no later row of this prefill reads its entries. A press whose
  // prompt-end work on a layer needs nothing more does it here, so that the prefill never
  // holds the whole prompt in every layer. No host capability may be used here. A press
  // that acts here and not at kPromptEnd is taken to evict each layer to its budget here
  // (PressPoints::evicts_each_prompt_layer; tests/engine/prefill_eviction_test.cpp checks
  // every such press), or to its candidate pool when it has one (Press::candidate_pool).
  kPromptLayerEnd,
  // After the whole prefill forward; the press may use the host's capabilities.
  kPromptEnd,
  // Question-agnostic mode (Session::prefill_question): n_tokens of question, at
  // first_position, follow the prompt, and their attention comes next. The press's prompt
  // stays the one before (the context): a one-shot press neither scores nor evicts the
  // question's entries, and decode step 1 is the first token fed after the question.
  kQuestion,
  // Decode step `step`'s layer `layer` has run: its attention has been observed and
  // nothing later in the step reads its entries, which are still in the processor's caches.
  kDecodeLayerEnd,
  // After decode step `step` (1 for the first token fed after the prefill).
  kDecodeStep,
};

// The points a press acts at: a set of PressPoint.
class PressPoints {
 public:
  constexpr PressPoints() = default;
  constexpr PressPoints(std::initializer_list<PressPoint> points) {
    for (PressPoint p : points) bits_ |= bit(p);
  }
  constexpr bool has(PressPoint p) const { return (bits_ & bit(p)) != 0; }
  constexpr PressPoints with(PressPoint p) const { return from_bits(bits_ | bit(p)); }
  constexpr PressPoints without(PressPoint p) const { return from_bits(bits_ & ~bit(p)); }
  constexpr PressPoints operator|(PressPoints other) const { return from_bits(bits_ | other.bits_); }
  constexpr bool operator==(const PressPoints&) const = default;
  // The press evicts each layer of a prompt as soon as the whole prompt has passed it and
  // does nothing more at its end, so a prefill holds the whole prompt in one layer at a
  // time (what the batch engine reserves for it: engine/kv_admission.h).
  constexpr bool evicts_each_prompt_layer() const {
    return has(PressPoint::kPromptLayerEnd) && !has(PressPoint::kPromptEnd);
  }

 private:
  static constexpr uint8_t bit(PressPoint p) { return static_cast<uint8_t>(1u << static_cast<unsigned>(p)); }
  static constexpr PressPoints from_bits(unsigned bits) {
    PressPoints out;
    out.bits_ = static_cast<uint8_t>(bits);
    return out;
  }
  uint8_t bits_ = 0;
};

// Where the session is when it calls a press: the point, and what the point is about.
struct PressAt {
  PressPoint point;
  int64_t layer = 0;           // kPromptLayerEnd, kDecodeLayerEnd
  int64_t step = 0;            // kDecodeLayerEnd, kDecodeStep (1: the first token fed after the prompt)
  int64_t first_position = 0;  // kPromptBegin, kQuestion: the first input position
  int64_t n_tokens = 0;        // kPromptBegin, kQuestion: how many tokens
  // kPromptBegin: how many of the prompt's last tokens are its question, where the caller
  // knows it (prefill_prompt, Session::prefill's question_tokens); 0 when none was given.
  // A press whose window is the question (Finch) sizes it from this.
  int64_t question_tokens = 0;
};

// A policy: the points it acts at, and the attention it observes. Whatever else a method
// needs from the engine it asks the PressHost for.
class Press {
 public:
  virtual ~Press() = default;

  // Called when the press is set on a session; `host` stays valid while it is set. A
  // press that cannot serve this model (e.g. a calibration profile of another model)
  // fails here, before anything runs; one that uses a capability declares it here.
  virtual void on_attach(const PressModelShape& shape, PressHost& host) {}
  // The points the press acts at: a constant of the press, fixed when it is built. The
  // session reads it once, at set_press, and calls act() at exactly these points; the batch
  // engine reserves a request's KV by it (evicts_each_prompt_layer()).
  virtual PressPoints points() const = 0;
  // What the press holds of a prompt of `prompt_tokens` on a model of `shape`, which the
  // batch engine reserves (engine/kv_admission.h) and the reports show. By default: the
  // whole prompt until it evicts, then its budget.
  virtual PressHolding holding(const PressModelShape& shape, int64_t prompt_tokens) const { return {}; }
  // Right after a prefill, for a press whose one eviction waits for decode step d and whose
  // whole state until then is its captured scores (DeferKV; PressRole::resumes_deferred):
  // that state. nullopt for every other press, or once a decode step has run.
  virtual std::optional<DeferredEviction> deferred_eviction() const { return std::nullopt; }
  // Puts a press fresh from make_press (the description and budget `state` was exported
  // with), attached to a session whose cache holds the entries of that prompt and nothing
  // after it, where the exporting press stood: its eviction waits for decode step d. Fails
  // for a press that exports none.
  virtual void resume_deferred(const DeferredEviction& state);
  // After each layer's attention, in prefill and decode (and capabilities' passes that
  // name no observer of their own).
  virtual void on_attention(const AttentionEvent& event) {}
  // The session is at `at`, a point the press declared. May evict through `cache`.
  virtual void act(const PressAt& at, KvCache& cache) = 0;

  // The parameter string this press was built from, with every default filled in.
  virtual std::string describe() const = 0;
};

struct PressParameter {
  std::string name;
  std::string default_value;
  std::string help;
};

// What a method reads to decide what to keep: `deferkv presses` groups the methods by it,
// because it is what a user choosing one asks first (does it need the question? a second
// pass? a file made for the model?).
enum class PressReads {
  kUnstated,       // a method that has not said (tests/press/press_params_test.cpp refuses it)
  kNothing,        // positions or chance alone, or keeps everything
  kKeysAndValues,  // the cached keys and values, no query: the same with or without the question
  kPromptQueries,  // the prompt's queries (their attention or statistics): question-aware when
                   // the question ends the prompt
  kDecodeQueries,  // the queries of the answer's first tokens, or of every step
  kExtraForward,   // a forward pass of its own after the prompt (lookahead, draft, learned rows,
                   // the context's reconstruction)
  kCalibration,    // a profile or weights made for the model beforehand
};
// A key for scripts ("nothing", "keys_and_values", "prompt_queries", "decode_queries",
// "extra_forward", "calibration") and one line for the group's heading.
const char* press_reads_name(PressReads reads);
const char* press_reads_heading(PressReads reads);

struct PressInfo {
  std::string name;
  std::string summary;
  std::string paper;
  std::vector<PressParameter> parameters;
  bool uses_budget = true;  // needs --kv-budget / --kv-ratio
  PressReads reads = PressReads::kUnstated;
};

// Every registered method, in a stable order.
const std::vector<PressInfo>& press_catalogue();

// Builds a press from "name" or "name:key=value,key=value", or several joined by '+'.
// Unknown names or keys, malformed values and a missing budget are errors naming them.
//
// Composition "a+b": every point goes to each press that declared it in the order given
// (a press's layer ends wait for the prompt's or the step's end when one before it acts
// there), and each may use the host. A press evicts the prompt's entries, or the generated ones (moment_kv), or
// both (a per-step trigger, per_step=true or every=n: tova by default, any scorer method
// or behavior_preserving when asked, cuts every entry back to the budget while decoding).
// make_press refuses, with an error
// naming both, two presses that
//  - both run extra forward passes to score (the greedy lookahead, a draft, rows after the
//    prompt, the context repeated: laq, laqpp, speckv, lookaheadkv, kvzip): a prefill has
//    room for one such protocol;
//  - or evict a region in common, unless the later one reads the cache as it is when it
//    evicts (streaming_llm and tova match by position, behavior_preserving scores the
//    entries held), the earlier one evicts once at the end of the prefill (so it is done
//    before the later one starts), and the later one evicts a region the earlier one
//    leaves alone. Otherwise a press's scores, indexed by the entries it observed, would
//    not match a cache the other one evicted from in between, or the later press would
//    find its region already cut to the budget and never act: a silent half-run.
// So a press of the prompt (any trigger: prefill end, or decode step d) joins
// one of the generated tokens in either order ("snapkv+moment_kv"), and one that evicts at
// the end of the prefill may be followed by a per-step press that reads the cache as it
// is ("adakv+tova": TOVA keeps AdaKV's ragged heads within b while decoding; "tova+adakv"
// and "deferkv+tova" are refused). "full" joins anything.
std::unique_ptr<Press> make_press(const std::string& spec, const KvBudget& budget);

// Whether a press built from `spec` (a valid one) is one press whose eviction waits for
// decode step d and can resume from a compressed context (Press::deferred_eviction: deferkv,
// with any pool): a context compressed with it is deferred, each question choosing its own
// kept set at its step d.
bool press_resumes_deferred(const std::string& spec);

// Whether a press built from `spec` (a valid one) evicts after the end of the prefill: at
// decode step d (deferkv), while decoding (per-step and decode-time presses). What it
// keeps then depends on what is read after the prompt, so a context it compressed
// question-agnostic serves one question.
bool press_evicts_after_prefill(const std::string& spec);

}  // namespace deferkv
