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
  // How a prompt given as context and question is compressed (prefill_prompt below).
  bool question_agnostic = false;
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

// Feeds a prompt given as a context and the question that follows it (which may be
// empty), for the press to compress:
//  - question-aware (question_agnostic false, the default): one prefill of context and
//    question, so the press's observation window holds the question's end;
//  - question-agnostic (kvpress's default): the context alone is prefilled and compressed,
//    then the question is read on the compressed cache (Session::prefill_question); an
//    error when the question is empty.
// The cache then holds the same positions either way. What each method does in each mode:
// docs/compression.md.
void prefill_prompt(Session& session, const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                    bool question_agnostic);
// "question-agnostic" or "question-aware": the mode as reports and headers name it.
const char* question_mode_name(bool question_agnostic);

// on_token is called with each generated token (the end-of-generation token is not
// passed); returning false stops generation.
GenerateResult generate(Session& session, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token = {});
// The same for a context and its question, fed as options.question_agnostic says.
GenerateResult generate(Session& session, const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace deferkv
