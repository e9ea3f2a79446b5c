#pragma once
// The body of POST /v1/completions and /v1/chat/completions, read and checked: every
// field's type, the shapes OpenAI's clients send (a list of prompts, chat content as a
// list of text parts), and the press and budget extensions. The ranges of the generation
// parameters are the engine's (deferkv/generation_params.h), shared with the Python
// bindings. Errors are ApiErrors naming the field.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/chat_template.h"
#include "deferkv/sampler.h"

namespace deferkv::server {

// The server's defaults for what a request leaves out.
struct CompletionDefaults {
  int64_t max_tokens = -1;  // -1: up to the context's end (OpenAI's and llama-server's default)
  std::string press = "full";
  int64_t kv_budget = 0;   // 0: none
  double kv_ratio = -1;    // < 0: none
};

// One prompt of /v1/completions: text (tokenized with BOS), or token ids taken as they are.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;  // non-empty: the prompt was given as ids
};

// The most alternatives a token's logprobs list (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct CompletionRequest {
  bool chat = false;
  // /v1/completions: one prompt, or OpenAI's list of prompts (one choice each, in order).
  std::vector<PromptInput> prompts;
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  bool stream = false;
  std::optional<int64_t> max_tokens;  // none: up to the context's end
  bool ignore_eos = false;  // llama.cpp's extension: generate max_tokens even past the end of generation
  // Log-probabilities of the chosen tokens: -1 none; 0 the chosen token's only; k also the
  // k likeliest tokens at each step (completions' `logprobs: k`, chat's `top_logprobs`).
  int32_t logprobs = -1;
  SamplerParams sampling;
  std::vector<std::string> stop;
  std::string press;
  int64_t kv_budget = 0;
  double kv_ratio = -1;
  // The id of a compressed context (POST /v1/contexts) to continue after: the prompt or the
  // messages are then the question; no press of its own ("" : none).
  std::string kv_context;
  // A new context is made of kv_context, this turn's question and the answer (the response's
  // `kv_context`): a multi-turn chat sends it with the next turn (docs/serving.md).
  bool kv_context_extend = false;
};

// Throws ApiError (400) for a body that is not a JSON object, a field of the wrong type or
// out of range, or a field the server does not implement given a value it would have to
// act on (n > 1, echo, a JSON response_format, a non-text content part). Fields the server
// does not know are ignored, as OpenAI's clients send some (e.g. user, logit_bias: {}).
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const CompletionDefaults& defaults);

}  // namespace deferkv::server
