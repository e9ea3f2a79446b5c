#pragma once
// The second step of a completion (after parsing, before replying): the parsed request made
// into one GenerationRequest a prompt, each tokenized (chat: through the chat template),
// checked against the vocabulary and the context, and given its press. Every refusal of a
// request's content comes here, before anything is queued.
#include <cstdint>
#include <vector>

#include "deferkv/chat_template.h"
#include "deferkv/tokenizer.h"
#include "server/completion_request.h"
#include "server/scheduler.h"

namespace deferkv::server {

struct CompletionPlan {
  std::vector<GenerationRequest> generations;  // one a prompt, in the choices' order
};

// Throws ApiError (400): a token id outside the vocabulary (`prompt`), a prompt that fills
// the context of n_ctx tokens (`context_length_exceeded`), a press that cannot be built
// (`kv_press`). `chat_template` is used for a chat request only.
CompletionPlan plan_completion(const CompletionRequest& r, const Tokenizer& tok, const ChatTemplate& chat_template,
                               int64_t n_ctx);

}  // namespace deferkv::server
