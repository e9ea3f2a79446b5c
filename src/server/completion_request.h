#pragma once
// The body of POST /v1/completions and /v1/chat/completions, read and checked: every
// field's type and range, the press and budget extensions. Errors are ApiErrors naming
// the field.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/chat_template.h"
#include "deferkv/sampler.h"

namespace deferkv::server {

// The server's defaults for what a request leaves out.
struct CompletionDefaults {
  int64_t max_tokens = 128;
  std::string press = "full";
  int64_t kv_budget = 0;   // 0: none
  double kv_ratio = -1;    // < 0: none
};

struct CompletionRequest {
  bool chat = false;
  std::string prompt;                 // /v1/completions, as text
  std::vector<int32_t> prompt_tokens;  // or as token ids (OpenAI's "array of tokens"), taken as they are
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  bool stream = false;
  int64_t max_tokens = 0;
  bool ignore_eos = false;  // llama.cpp's extension: generate max_tokens even past the end of generation
  SamplerParams sampling;
  std::vector<std::string> stop;
  std::string press;
  int64_t kv_budget = 0;
  double kv_ratio = -1;
};

// Throws ApiError (400) for a body that is not a JSON object or a field of the wrong type
// or out of range. Fields the server does not know are ignored, as OpenAI's clients send
// some (e.g. n=1, logprobs=null).
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const CompletionDefaults& defaults);

}  // namespace deferkv::server
