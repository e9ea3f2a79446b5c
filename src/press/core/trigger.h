#pragma once
// When a press evicts [docs/methods/README.md, "Triggers"]: once at the end of the
// prefill (the default); once after decode step d (DeferKV's trigger, any scorer may take
// it); or per step: at the end of the prefill and then after every n-th decode step,
// when the budget holds the whole cache, generated entries included (H2O's and TOVA's
// originals, StreamingLLM's sliding window). One part for every method, chosen by the
// parameters d, per_step and every.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

class Trigger {
 public:
  static Trigger at_prefill_end() { return Trigger(0, 0); }
  static Trigger after_step(int64_t d) { return Trigger(d, 0); }
  static Trigger every(int64_t n) { return Trigger(0, n); }

  // An eviction fires at the end of the prefill.
  bool fires_at_prefill_end() const { return delay_ == 0; }
  // An eviction fires after decode step `step` (1 for the first token after the prefill).
  bool fires_after(int64_t step) const { return period_ > 0 ? step % period_ == 0 : step == delay_; }
  // The evictions keep cutting while decoding: the budget holds every entry, generated ones too.
  bool per_step() const { return period_ > 0; }
  int64_t delay() const { return delay_; }  // 0: at the end of the prefill

 private:
  Trigger(int64_t delay, int64_t period) : delay_(delay), period_(period) {}
  int64_t delay_;
  int64_t period_;  // 0: once
};

// The parameter d, with the method's default ("0": at the end of the prefill).
PressParameter delay_parameter(const std::string& default_value);
// The parameters per_step (with the method's default) and every.
std::vector<PressParameter> per_step_parameters(bool per_step_default);

// What a ratio budget is a share of at a per-step eviction [docs/methods/decoding_ratio.md]:
// the prompt, resolved once when it is prefilled (a fixed count while decoding, kvpress's
// DecodingPress), or every token seen so far, prompt and generated (kvpress's
// CompressionRatioDecodingPress: max(1, int(seen (1 - r))) at each eviction).
enum class RatioOf { kPrompt, kSeen };
// The parameter ratio_of (default prompt); read where declared. ratio_of=seen needs a
// per-step trigger (every=N or per_step=true); the ratio budget is checked by the press.
PressParameter ratio_of_parameter();
RatioOf read_ratio_of(const PressParams& params, const Trigger& trigger);

// Reads d, per_step and every where the method declares them. every = n > 0 evicts per
// step every n steps; else per_step=true every step; else once (at step d, or at the end
// of the prefill). d and per-step eviction together are refused.
Trigger read_trigger(const PressParams& params);

}  // namespace deferkv
