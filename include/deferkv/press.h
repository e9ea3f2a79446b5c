#pragma once
// KV-cache compression ("presses"): policy objects a Session calls at fixed points
// (after each layer's attention, at the end of a prefill, after each decode step) and
// that evict cache entries through KvCache::retain. Build one from a parameter string:
//
//   auto press = make_press("deferkv:d=1,eta=0.7,base=adakv", KvBudget::per_head(128));
//   session.set_press(std::move(press));
//
// Presses compose with '+', each seeing every hook in turn, e.g. a prefill press and a
// decode-time one: "snapkv+moment_kv:decode_budget=512".
//
// press_catalogue() lists every method with its parameters, defaults and paper.
#include <cstdint>
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
  std::string describe() const;

 private:
  int64_t per_head_ = 0;
  double ratio_ = -1;
};

// The model shape a press is attached to.
struct PressModelShape {
  int64_t n_layer, n_head, n_head_kv, head_dim;
  int64_t n_embd = 0, n_ff = 0;  // hidden and feed-forward widths
};

class Press {
 public:
  virtual ~Press() = default;

  // Called when the press is set on a session; a press that cannot serve this model
  // (e.g. a calibration profile of another model) fails here, before anything runs.
  virtual void on_attach(const PressModelShape& shape) {}

  // A prefill of n_tokens starting at first_position begins.
  virtual void on_prefill_begin(int64_t first_position, int64_t n_tokens) {}
  // After each layer's attention, in prefill and decode.
  virtual void on_attention(const AttentionEvent& event) {}
  // After the whole prefill forward; may evict.
  virtual void on_prefill_end(KvCache& cache) {}
  // After decode step `step` (1 for the first token fed after the prefill); may evict.
  virtual void on_decode_step(KvCache& cache, int64_t step) {}

  // Lookahead (LAQ): when this returns n > 0 after on_prefill_end, the session saves
  // its state, calls on_lookahead_begin (the press may compress the working cache), runs
  // up to n greedy decode steps on it (stopping at end of generation; the press sees
  // their attention), puts the cache and logits back, and calls on_lookahead_end (the
  // final eviction). The real generation then starts from the prefill's logits.
  virtual int64_t lookahead_tokens() const { return 0; }
  virtual void on_lookahead_begin(KvCache& cache) {}
  virtual void on_lookahead_end(KvCache& cache) {}

  // Draft (SpecKV): when this returns n > 0 after on_prefill_begin, the session's draft
  // model continues the prompt greedily by up to n tokens and the model prefills prompt
  // + draft (the press sees all of it); after on_prefill_end the session drops every
  // entry from the prompt's last position on and feeds that last token again.
  virtual int64_t draft_tokens() const { return 0; }

  // Learned lookahead (LookaheadKV): when this returns rows after on_prefill_begin, the
  // session runs them through the model right after the prompt (positions T, T+1, ...),
  // as input embeddings with their low-rank deltas applied to those rows only; the press
  // sees their attention. Their cache entries are then dropped and on_prefill_end runs:
  // the prompt's entries and logits are exactly those of a prefill without them.
  virtual const LookaheadRows* lookahead_rows() const { return nullptr; }
  // Output-aware scoring (behavior_preserving): a press returning true gets, right after
  // on_attach, a read-out of the model's output path (model_readout.h; valid while the
  // press is set on the session), and after the last layer of every forward pass the
  // batch's final residual stream (on_final_residual). Others pay nothing for it.
  virtual bool needs_model_readout() const { return false; }
  virtual void on_model_readout(const ModelReadout& readout) {}
  virtual void on_final_residual(const ResidualEvent& event) {}

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
std::unique_ptr<Press> make_press(const std::string& spec, const KvBudget& budget);

}  // namespace deferkv
