#pragma once
// The second step of a completion (after parsing, before replying): the parsed request made
// into one GenerationRequest a prompt, each tokenized (chat: through the chat template),
// checked against the vocabulary and the context, and given its press. Every refusal of a
// request's content comes here, before anything is queued.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deferkv/compressed_context.h"
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
//
// With `context` (r.kv_context, found): each prompt is the question read after the context's
// tokens, tokenized alone without BOS (a SentencePiece vocabulary still puts its space before
// it); a chat's question is the template applied to the new messages alone, the assistant's
// turn opened, also without BOS. Token-id prompts are taken as they are. The context and the
// question must leave room in the context of n_ctx tokens.
// The request's press with its budget (kv_budget or kv_ratio) on `g`; none for "full". An
// unknown press or bad parameters are a 400 naming kv_press.
void set_press(const CompletionRequest& r, GenerationRequest& g);

CompletionPlan plan_completion(const CompletionRequest& r, const Tokenizer& tok, const ChatTemplate& chat_template,
                               int64_t n_ctx, const std::shared_ptr<const CompressedContext>& context = nullptr);

// The tokens of a context to compress (POST /v1/contexts): the prompt with BOS, or the chat
// template applied to the messages with BOS and no assistant turn opened (the questions'
// messages open it). One prompt only; it must leave room in n_ctx. Throws ApiError (400).
std::vector<int32_t> context_tokens(const CompletionRequest& r, const Tokenizer& tok, const ChatTemplate& chat_template,
                                    int64_t n_ctx);

}  // namespace deferkv::server
