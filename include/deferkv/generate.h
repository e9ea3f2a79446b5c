#pragma once
// The decode loop: prefill a prompt, then sample and feed tokens until a stop.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deferkv/sampler.h"
#include "deferkv/session.h"

namespace deferkv {

struct GenerateOptions {
  int64_t n_predict = 128;   // < 0: until end of generation or a full context
  bool stop_at_end_of_generation = true;
  // Called once the prompt is in the cache, before the first token is sampled
  // (e.g. to save the prompt's last logits).
  std::function<void(const Session&)> after_prefill;
};

enum class StopReason { kEndOfGeneration, kTokenLimit, kContextFull, kCallback };
const char* stop_reason_name(StopReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated, without the prompt
  StopReason stop = StopReason::kTokenLimit;
};

// on_token is called with each generated token (the end-of-generation token is not
// passed); returning false stops generation.
GenerateResult generate(Session& session, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace deferkv
