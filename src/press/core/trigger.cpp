#include "press/core/trigger.h"

#include "deferkv/error.h"

namespace deferkv {

PressParameter delay_parameter(const std::string& default_value) {
  return {"d", default_value, "trigger: evict once, after decode step d (0: at the end of the prefill)"};
}

std::vector<PressParameter> per_step_parameters(bool per_step_default) {
  return {
      {"per_step", per_step_default ? "true" : "false",
       "trigger: evict at the end of the prefill and after every decode step, the budget holding the whole cache "
       "(generated entries included)"},
      {"every", "0", "trigger: per-step eviction every n-th decode step (n > 0 implies per_step; 0: per_step decides)"},
  };
}

PressParameter ratio_of_parameter() {
  return {"ratio_of", "prompt",
          "trigger: a ratio budget (--kv-ratio) is a share of the prompt (prompt: a fixed count while decoding) or, "
          "per step, of every token seen so far (seen: kvpress's CompressionRatioDecodingPress)"};
}

RatioOf read_ratio_of(const PressParams& params, const Trigger& trigger) {
  if (!params.has("ratio_of") || params.get_choice("ratio_of", {"prompt", "seen"}) == "prompt") return RatioOf::kPrompt;
  if (!trigger.per_step()) {
    fail("press '{}': ratio_of=seen keeps a share of every token seen at each eviction while decoding; it needs "
         "every=N or per_step=true",
         params.name());
  }
  return RatioOf::kSeen;
}

Trigger read_trigger(const PressParams& params) {
  const int64_t delay = params.has("d") ? params.get_int("d", 0, 1 << 20) : 0;
  int64_t period = params.has("every") ? params.get_int("every", 0, 1 << 24) : 0;
  if (period == 0 && params.has("per_step") && params.get_bool("per_step")) period = 1;
  if (period > 0 && delay > 0) {
    fail("press '{}': d={} evicts once after decode step d and per-step eviction (per_step/every) cuts at every "
         "step: choose one trigger",
         params.name(), delay);
  }
  if (period > 0) return Trigger::every(period);
  return delay > 0 ? Trigger::after_step(delay) : Trigger::at_prefill_end();
}

}  // namespace deferkv
