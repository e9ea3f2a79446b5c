#pragma once
// One turn of the decode loop, shared by generate() and the batch engine: after a prefill
// or a decode step, sample the next token and check the stop conditions.
#include <cstdint>
#include <functional>
#include <optional>

#include "deferkv/generate.h"

namespace deferkv {

// Samples from the session's last logits and appends the token to result.tokens (passing
// it to on_token); returns the token to decode next, or nothing once generation stopped
// (result.stop says why).
std::optional<int32_t> next_token_to_decode(const Session& session, Sampler& sampler, const GenerateOptions& options,
                                            GenerateResult& result, const std::function<bool(int32_t)>& on_token);

}  // namespace deferkv
