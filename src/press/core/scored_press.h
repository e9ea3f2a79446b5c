#pragma once
// A scorer method on the shared parts [docs/adding-a-press.md]: the press captures the
// attention its scorer asks for (CaptureConfig), and when its trigger fires (trigger.h:
// end of prefill, decode step d, or every n steps) it asks the scorer, one layer at a
// time, for a score per candidate of each KV head, lets the allocation (allocation.h)
// decide how many each head keeps and the selection (selection.h) which, and compacts the
// cache. A method file is a ScoredPress that implements score(), with its defaults. The
// prompt's bookkeeping, the budget check and the host are PromptPress's (prompt_press.h).
//
// An eviction at the end of the prefill runs layer by layer inside the prefill
// (PressPoint::kPromptLayerEnd): each layer's scores read only that layer's captured
// attention, keys and values, complete once the prompt has passed it, so the layers kept
// are those of an eviction after the prefill, and the prefill's peak is one layer's full
// prompt plus the other layers' budgets. A method that scores with something it gets at the
// prompt's end (LookaheadKV's rows) declares kPromptEnd instead (points()) and evicts every
// layer there. An eviction after a decode step runs the same way, at kDecodeLayerEnd.
//
// Entries of one head: the candidates [0, C) are the entries older than the protected
// window: at a one-shot eviction the prompt entries before position T - window (the window
// and every decode token are kept, and b counts prompt entries); per step every entry but
// the newest `window` (b then counts every entry). The first `sinks` candidates are kept
// too, counted in b.
#include <cstdint>
#include <optional>
#include <vector>

#include "deferkv/press.h"
#include "observe/attention_observation.h"
#include "press/core/captured_attention.h"
#include "press/core/allocation.h"
#include "press/core/candidate_pool.h"
#include "press/core/press_params.h"
#include "press/core/prompt_pieces.h"
#include "press/core/prompt_press.h"
#include "press/core/selection.h"
#include "press/core/trigger.h"
#include "press/core/two_stage.h"
#include "press/registry.h"

namespace deferkv {

struct Rotary;

// One set of queries a scorer observes, with their weights, and where their attention
// goes: into the per-entry sums the scorer reads as LayerEviction::prompt_attention, or, for
// kDecodeSteps, one capture per step (LayerEviction::decode_attention). A method's
// observations are a value (CaptureConfig), walked by ScoredPress's one capture; a method
// adds none of its own code to observe.
struct Observation {
  enum class Queries {
    kPromptWindow,  // the last `count` prompt queries, query i weighted weights[i] (oldest first; none: 1/count)
    kPromptAll,     // every query of the prompt, weight 1 (H2O)
    kDecodeSteps,   // the queries of decode steps 1..count, each step kept apart (DeferKV)
    // Every decode query, weight 1, added to the sums, which then follow the entries kept
    // from eviction to eviction and from prompt to prompt (H2O's "attention drawn so far",
    // per step).
    kDecodeAll,
    // The query of each decode step whose eviction fires: it replaces the sums (TOVA).
    kTriggerStep,
  };
  Queries queries;
  int64_t count = 0;           // kPromptWindow: queries; kDecodeSteps: steps
  std::vector<float> weights;  // kPromptWindow only

  static Observation prompt_window(int64_t window, std::vector<float> weights = {}) {
    return {Queries::kPromptWindow, window, std::move(weights)};
  }
  static Observation decode_steps(int64_t steps) { return {Queries::kDecodeSteps, steps, {}}; }
  static Observation every(Queries queries) { return {queries, 0, {}}; }  // kPromptAll, kDecodeAll, kTriggerStep
};

// What a scorer observes: its observations, each query's attention reduced per entry of
// each KV head by `rows` (over the queries) and `group` (over a KV head's query heads).
struct CaptureConfig {
  std::vector<Observation> observations;
  RowReduction rows = RowReduction::kWeightedSum;
  GroupReduction group = GroupReduction::kMean;

  bool captures_anything() const { return !observations.empty(); }
  bool observes(Observation::Queries queries) const;
  int64_t count_of(Observation::Queries queries) const;  // its count; 0 when not observed
};

// What a scorer sees of one layer when the eviction fires.
struct LayerEviction {
  int64_t layer;
  int64_t n_layer;
  int64_t prompt_end;     // T: the position after the prompt's last token
  int64_t next_position;  // the position after the newest entry (T + the decode steps so far)
  int64_t budget;         // b: entries kept per KV head, window included
  int64_t window;         // protected newest entries per head
  std::vector<int64_t> candidates;  // per KV head: C
  // The captured attention per KV head, matched to the head's current entries by position
  // (0 for an entry never observed), at least C values each; empty for a method that
  // captures nothing.
  const std::vector<std::vector<float>>& prompt_attention;
  // decode_attention[s - 1][g]: decode step s's query over head g's entries.
  const std::vector<std::vector<std::vector<float>>>& decode_attention;
  const KvCache& cache;

  int64_t n_head_kv() const { return static_cast<int64_t>(candidates.size()); }
  // prompt_attention[g][0 .. C_g) for every head: the captured attention as the score.
  std::vector<std::vector<float>> candidate_attention() const;
};

// Where the kept entries sit after a prompt eviction [docs/methods/key_rerotation.md]:
// at their original positions (the default: the keys stay as the prefill stored them),
// or renumbered 0 .. n-1 with their keys re-rotated to those positions and the session
// continuing at n (kvpress's KeyRerotationPress, Finch's rerotate_keys).
enum class KeyPositions { kOriginal, kRerotated };

// How a method uses the shared parts; read_scored_parts fills all but the capture and
// the window from the shared parameters.
struct ScoredParts {
  CaptureConfig capture;
  int64_t window = 0;  // protected newest entries per head
  AllocationRule allocation;
  Selection selection;
  Trigger trigger = Trigger::at_prefill_end();
  RatioOf ratio_of = RatioOf::kPrompt;  // what a ratio budget is a share of per step (trigger.h)
  // The prompt scored whole, or in blocks or segments (prompt_pieces.h; methods that
  // declare them: SharedDefaults::pieces).
  PromptPieces pieces;
  // CriticalKV's two stages on the scores once the allocation has counted each head's
  // entries (two_stage.h); none: the scores select as they are.
  std::optional<TwoStageSelection> two_stage;
  KeyPositions key_positions = KeyPositions::kOriginal;
  // With a deferred trigger (d > 0): the candidate pool each layer is cut to inside the
  // prefill (candidate_pool.h); all: none.
  CandidatePool pool = CandidatePool::all();
};
// The parameter rerotate (default off) and its reading: refused, naming the reason, with
// a trigger other than the prefill's end (a per-step or deferred eviction would renumber
// entries whose captured attention is matched by position) and with an allocation that
// does not keep the same count in every head (the next position must follow every head).
PressParameter rerotation_parameter(bool default_on = false);
KeyPositions read_key_positions(const PressParams& params, const ScoredParts& parts);


class ScoredPress : public PromptPress {
 public:
  ScoredPress(const PressParams& params, const KvBudget& budget, ScoredParts parts);

  // Refuses a calibration profile of another depth before anything runs.
  void on_attach(const PressModelShape& shape, PressHost& host) override;
  // PromptPress's, and where the trigger fires: kPromptLayerEnd when at the end of the
  // prefill, kDecodeLayerEnd when after decode steps (per step, or DeferKV's step d): a
  // layer's scores need only its own captures, complete once its attention was observed.
  PressPoints points() const override;
  void on_attention(const AttentionEvent& event) override;
  // At a layer end where the trigger fires, evicts the layer; at kPromptEnd (declared by a
  // method that scores there instead), every layer.
  void act(const PressAt& at, KvCache& cache) override;
  // The pool's entries per KV head with a deferred trigger and pool != all; else -1.
  PressHolding holding(const PressModelShape& shape, int64_t prompt_tokens) const override;
  // For a scorer that resumes_from_captures(), with a deferred trigger, right after its
  // prefill: the captured prompt scores of every layer (after the pool's cut); else none.
  std::optional<DeferredEviction> deferred_eviction() const override;
  void resume_deferred(const DeferredEviction& state) override;

 protected:
  // The scorer's score at step d reads the captures and the decode steps' attention only
  // (no state of its own), so a deferred eviction exported after the prefill resumes exactly
  // (DeferKV). False by default.
  virtual bool resumes_from_captures() const { return false; }
  // A scorer that resumes from its captures, with a one-time eviction at decode step d: it
  // exports and resumes a deferred eviction (deferred_eviction, resume_deferred).
  bool defers_to_context() const;
  // Per KV head, a score for each of its C candidates (more: keep), at least C values.
  virtual std::vector<std::vector<float>> score(const LayerEviction& layer) = 0;
  // The scores that choose the candidate pool at a prompt layer's end (no decode step has
  // run: decode_attention is empty): score() itself by default; a scorer that needs its
  // decode observations (DeferKV) scores with the prompt's alone.
  virtual std::vector<std::vector<float>> pool_score(const LayerEviction& layer) { return score(layer); }
  // A prefill ran whose eviction has not fired yet, and it will cut something.
  bool will_evict() const;
  // A window sized per prompt (Finch's question): the protected window and the captured
  // window queries with their weights (oldest first), for the prefill about to begin. Call
  // it at kPromptBegin before ScoredPress::act.
  void set_window(int64_t window, std::vector<float> weights);

 private:
  // A prefill starting at first_position begins: its eviction is pending, its captures fresh.
  void begin_prompt(int64_t first_position);
  // Adds the event's rows that `observation` covers to its capture (one event: one batch
  // of consecutive positions through one layer).
  void capture(const Observation& observation, const AttentionEvent& event, int64_t step);
  void capture_prompt(const Observation& observation, const AttentionEvent& event);
  void capture_rows(const AttentionEvent& event, int64_t skip, const float* weights, CapturedAttention& into) const;
  // Layer l's part of the eviction at this trigger (the layers come in order); the last
  // layer ends the eviction.
  void evict_at(KvCache& cache, int64_t step, int64_t l);
  // Evicts layer l (the next one: evicted_layers_) at this trigger.
  void evict_layer(KvCache& cache, int64_t step, int64_t l);
  // Cuts layer l (the next one: pooled_layers_) to the candidate pool, at its prompt end,
  // its capture following the entries kept for the eviction at step d.
  void pool_layer(KvCache& cache, int64_t l);
  // The pool cuts this prompt: a deferred eviction is pending and the prompt outgrows it.
  bool pools_prompt() const;
  // The eviction at this trigger is over (every layer done, or nothing to cut).
  void end_eviction();
  // After a re-rotating eviction of the prompt: the session's next position is n, after
  // the kept entries (PressHost::continue_at).
  void continue_after_kept(const KvCache& cache);
  // b for the eviction after decode step `step` (0: the prompt's): the prompt's budget, or
  // with ratio_of=seen the ratio of every position seen.
  int64_t budget_at(int64_t step) const;
  // Per KV head of layer l: C, the entries older than the protected window.
  std::vector<int64_t> candidate_counts(const KvCache& cache, int64_t l, int64_t window) const;
  // Per KV head: the candidates dropped (ascending), from the scorer's scores, by the
  // sinks, the allocation and the selection.
  // Two stages rewrite the scores in place.
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer, std::vector<std::vector<float>>& scores,
                                           LayerSelector& selector) const;
  // Fits a capture to layer l's entries, in place: one value per entry, in the cache's
  // order (an entry it did not see scores 0; after another press's eviction the values
  // follow their entries by position).
  void match_to_cache(CapturedAttention& captured, const KvCache& cache, int64_t l) const;
  // What the captures of layer l become once it has dropped `dropped` (per head): freed,
  // or (per step) kept for the next eviction, following the entries kept.
  void keep_captured(const KvCache& cache, int64_t l, const std::vector<std::vector<int32_t>>& dropped);

  ScoredParts parts_;
  const ModelReadout* readout_ = nullptr;  // W_O, for two stages
  bool renumbered_ = false;  // this prompt's eviction re-rotated keys: the session continues after them
  const Rotary* rotary_ = nullptr;         // the model's RoPE, from its attention events, for re-rotation
  PressModelShape shape_{};

  int64_t prompt_first_ = 0;  // first position of the last prefill
  bool pending_ = false;  // a prefill ran and its (first) eviction has not fired yet
  std::vector<CapturedAttention> prompt_attention_;               // [layer]
  std::vector<std::vector<CapturedAttention>> decode_attention_;  // [step][layer]
  // The eviction under way: layers [0, evicted_layers_) are done; the selector carries the
  // chunk choice from layer to layer.
  int64_t evicted_layers_ = 0;
  std::optional<LayerSelector> selector_;
  // The pool's cut of this prompt: entries per KV head (-1: none), layers done, selector.
  int64_t pool_entries_ = -1;
  int64_t pooled_layers_ = 0;
  std::optional<LayerSelector> pool_selector_;
};

// The shared parameters of a scorer method, appended to its own: allocation (alloc,
// rounding, beta, alpha, profile), selection (chunk, reuse) and trigger (d, per_step,
// every), with the method's defaults.
struct SharedDefaults {
  AllocationKind alloc = AllocationKind::kUniform;
  int64_t chunk = 0;      // 0: each head its own top-k
  bool per_step = false;  // true: evict at the prefill's end and after every decode step
  bool triggers = true;  // false: the method evicts at the end of the prefill only
  // true: block= and segment= (prompt_pieces.h), for a scorer whose score reads only the
  // entries it is given, so that a piece scores as a whole head would.
  bool pieces = false;
};
std::vector<PressParameter> with_shared_parameters(std::vector<PressParameter> own, const SharedDefaults& defaults = {});
ScoredParts read_scored_parts(const PressParams& params);

// A scorer method's role in a composition, from its trigger: it evicts the prompt, and
// per step the generated entries too. The second form for a scorer whose scores are
// matched to the entries by position at every eviction and that reads no other press's
// choice (the rules: make_press in deferkv/press.h).
PressRole scored_press_role(const PressParams& params);
PressRole position_matched_press_role(const PressParams& params);

}  // namespace deferkv
