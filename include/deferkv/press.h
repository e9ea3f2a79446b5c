#pragma once
// KV-cache compression ("presses"): policy objects a Session calls at fixed points
// (after each layer's attention, at the end of a prefill, after each decode step) and
// that evict cache entries through KvCache::retain. Build one from a parameter string:
//
//   auto press = make_press("deferkv:d=1,eta=0.7,base=adakv", KvBudget::per_head(128));
//   session.set_press(std::move(press));
//
// Presses compose with '+', each seeing every hook in turn, e.g. a prefill press and a
// decode-time one: "snapkv+moment_kv:decode_budget=512" (the rules: make_press below).
//
// press_catalogue() lists every method with its parameters, defaults and paper.
#include <cstdint>
#include <functional>
#include <memory>
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
  // hook, so that a refused prefill leaves the session and every press as they were.
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
  // this call on the final residual stream of every forward pass also goes to `observe`.
  virtual const ModelReadout& read_model_output(ResidualObserver observe) = 0;

  // The model's text, at any time: a press that writes a request to the model (KVzip's
  // "repeat the context") encodes it here and frames it as the prompt is framed.
  //
  // The model's tokens for `text`, without BOS; special tokens are not parsed.
  virtual std::vector<int32_t> encode_text(const std::string& text) = 0;
  // The frames a prompt may have around its text, the model's chat form first (when deferkv
  // knows the model's chat template), then the plain one.
  virtual std::vector<PromptFrame> prompt_frames() = 0;

  // Capabilities, in on_prefill_end.
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

 protected:
  ~PressHost() = default;
};

// What a press's on_prefill_layer_end does with each layer of a prompt.
enum class PrefillLayerEnd {
  kKeepsLayers,   // returns false: every layer stays whole until on_prefill_end
  kPassesLayers,  // returns true and evicts nothing there (no prompt eviction, or a later one)
  kEvictsLayers,  // returns true, each layer evicted there to the press's budget
};

// A policy: lifecycle hooks and the attention it observes. Whatever else a method needs
// from the engine it asks the PressHost for.
class Press {
 public:
  virtual ~Press() = default;

  // Called when the press is set on a session; `host` stays valid while it is set. A
  // press that cannot serve this model (e.g. a calibration profile of another model)
  // fails here, before anything runs; one that uses a capability declares it here.
  virtual void on_attach(const PressModelShape& shape, PressHost& host) {}

  // A prefill of n_tokens starting at first_position begins.
  virtual void on_prefill_begin(int64_t first_position, int64_t n_tokens) {}
  // After each layer's attention, in prefill and decode.
  virtual void on_attention(const AttentionEvent& event) {}
  // Layer `layer` of the prompt is complete: every prompt row has passed it (its attention
  // has been observed) and no later row of this prefill reads its entries. The session runs
  // a prompt layer by layer, so the layers come in order, each once, before on_prefill_end.
  // A press whose prefill-end work on the layer needs nothing more (its scores for the
  // layer are final) may do it now, evicting the layer so that the prefill never holds the
  // whole prompt in every layer, and returns true: it is done with the layer, and its
  // on_prefill_end leaves it alone. False (the default: the layer stays whole until
  // on_prefill_end, e.g. for a press that scores with forward passes after the prompt)
  // ends these calls for this prefill. No host capability may be used here.
  virtual bool on_prefill_layer_end(KvCache& cache, int64_t layer) { return false; }
  // What on_prefill_layer_end will do, declared before any prefill, so that a scheduler can
  // project the KV a request holds at its peak (the batch engine's admission): one layer's
  // whole prompt beside the others' budgets when it evicts layer by layer, the whole prompt
  // in every layer otherwise.
  virtual PrefillLayerEnd prefill_layer_end() const { return PrefillLayerEnd::kKeepsLayers; }
  // After the whole prefill forward; may evict, and may use the host's capabilities.
  virtual void on_prefill_end(KvCache& cache) {}
  // Question-agnostic mode (Session::prefill_question): n_tokens of question, at
  // first_position, follow the prompt the press has just seen, and their attention comes
  // next. The press's prompt stays the one before (the context): a one-shot press neither
  // scores nor evicts the question's entries, and decode step 1 is the first token fed
  // after the question. What each family does: docs/compression.md.
  virtual void on_question(int64_t first_position, int64_t n_tokens) {}
  // Decode step `step`'s layer `layer` is done with its entries: its attention has run and
  // been observed, and nothing later in the step reads them. A press whose work on the
  // layer at this step needs nothing more may do it now, evicting while the layer's
  // entries are still in the processor's caches (they were just read), and returns true:
  // its on_decode_step leaves the layer alone. It must answer the same for every layer of
  // a step; false (the default) leaves every layer to on_decode_step. Not every driver
  // calls it, so on_decode_step must still do the work of any layer it was not given.
  virtual bool on_decode_layer_end(KvCache& cache, int64_t layer, int64_t step) { return false; }
  // After decode step `step` (1 for the first token fed after the prefill); may evict.
  virtual void on_decode_step(KvCache& cache, int64_t step) {}

  // The parameter string this press was built from, with every default filled in.
  virtual std::string describe() const = 0;
};

struct PressParameter {
  std::string name;
  std::string default_value;
  std::string help;
};

struct PressInfo {
  std::string name;
  std::string summary;
  std::string paper;
  std::vector<PressParameter> parameters;
  bool uses_budget = true;  // needs --kv-budget / --kv-ratio
};

// Every registered method, in a stable order.
const std::vector<PressInfo>& press_catalogue();

// Builds a press from "name" or "name:key=value,key=value", or several joined by '+'.
// Unknown names or keys, malformed values and a missing budget are errors naming them.
//
// Composition "a+b": every hook goes to each press in the order given, and each may use
// the host. A press evicts the prompt's entries, or the generated ones (moment_kv), or
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

// Whether a press built from `spec` (a valid one) evicts after the end of the prefill: at
// decode step d (deferkv), while decoding (per-step and decode-time presses). What it
// keeps then depends on what is read after the prompt, so a context it compressed
// question-agnostic serves one question.
bool press_evicts_after_prefill(const std::string& spec);

}  // namespace deferkv
