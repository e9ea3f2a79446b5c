// The server's request bodies: an endpoint byte (0 /v1/completions, 1 /v1/chat/completions,
// 2 /tokenize, 3 /detokenize; the next bit picks the server's defaults), then the body.
// Asserts that every body gives either a request or an ApiError with a 4xx status (never
// another exception), and that an accepted request holds the documented ranges
// (docs/serving.md) and the values the body gave.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/request_body.h"
#include "server/token_requests.h"

namespace {

using deferkv::fuzz::require;
using nlohmann::json;
namespace server = deferkv::server;

constexpr int32_t kVocab = 512;

// Runs `body`; an ApiError must be a client error (anything else thrown aborts).
template <typename Body>
bool accepts(Body&& body) {
  return deferkv::fuzz::accepts_as<server::ApiError>(std::forward<Body>(body), [](const server::ApiError& e) {
    require(e.status >= 400 && e.status < 500, "a bad request gets a 4xx status");
    require(e.type == "invalid_request_error", "a bad request's type is invalid_request_error");
  });
}

// The body's value of `name` when it is present and not null.
const json* given(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

void check_completion(const json& body, const server::CompletionRequest& r, bool chat,
                      const server::CompletionDefaults& defaults) {
  require(r.chat == chat, "the request is of the endpoint's kind");
  if (chat) {
    require(!r.messages.empty() && r.messages.size() == body["messages"].size(), "one message per entry");
    for (const auto& m : r.messages) {
      require(m.role == "system" || m.role == "user" || m.role == "assistant", "a message's role is known");
    }
  } else if (body["prompt"].is_string()) {
    require(r.prompts.size() == 1 && r.prompts[0].text == body["prompt"].get<std::string>() &&
                r.prompts[0].tokens.empty(), "a text prompt is kept as given");
  } else if (body["prompt"][0].is_number()) {
    require(r.prompts.size() == 1 && r.prompts[0].tokens.size() == body["prompt"].size(), "one id per prompt token");
  } else {
    require(r.prompts.size() == body["prompt"].size(), "one prompt per entry of a list of prompts");
  }
  for (const auto& p : r.prompts) {
    for (int32_t id : p.tokens) require(id >= 0, "prompt ids are not negative");
  }
  require(!r.stream || r.prompts.size() <= 1, "a stream has one prompt");
  require(r.logprobs >= -1 && r.logprobs <= server::kMaxTopLogprobs, "logprobs in [-1, 20]");
  if (r.max_tokens) require(*r.max_tokens >= 1 && *r.max_tokens <= (1 << 20), "max_tokens in [1, 2^20]");
  const json* max_completion = chat ? given(body, "max_completion_tokens") : nullptr;
  const json* max_tokens = max_completion != nullptr ? max_completion : given(body, "max_tokens");
  if (max_tokens != nullptr) {
    require(r.max_tokens == max_tokens->get<int64_t>(), "max_tokens is the body's (chat: max_completion_tokens first)");
  } else {
    require(r.max_tokens.value_or(-1) == defaults.max_tokens, "max_tokens is the default when the body has none");
  }
  if (const json* v = given(body, "stream")) require(r.stream == v->get<bool>(), "stream is the body's");
  const auto& s = r.sampling;
  require(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 100, "temperature in [0, 100]");
  require(s.top_p > 0 && s.top_p <= 1, "top_p in (0, 1]");
  require(s.min_p >= 0 && s.min_p < 1, "min_p in [0, 1)");
  require(s.top_k >= 0 && s.top_k <= (1 << 20), "top_k in [0, 2^20]");
  try {
    s.validate();
  } catch (const deferkv::Error&) {
    require(false, "the sampler takes the parameters the parser accepts");
  }
  require(r.stop.size() <= 16, "at most 16 stop strings");
  for (const auto& stop : r.stop) require(!stop.empty(), "stop strings are not empty");
  require(given(body, "kv_press") != nullptr || r.press == defaults.press, "the press is the body's or the default");
  const bool budget = r.kv_budget > 0, ratio = r.kv_ratio >= 0;
  require(!(budget && ratio), "a budget or a ratio, not both");
  require(r.kv_budget >= 0 && r.kv_budget <= (1 << 24), "kv_budget in [1, 2^24], or 0 for none");
  if (ratio) require(r.kv_ratio <= 0.999, "kv_ratio in [0, 0.999]");
  if (r.press == "full") {
    require(given(body, "kv_budget") == nullptr && given(body, "kv_ratio") == nullptr,
            "the full cache takes no budget");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int endpoint = data[0] & 3;
  server::CompletionDefaults defaults;
  if (data[0] & 4) {  // a server started with a press and a budget
    defaults.press = "snapkv";
    defaults.kv_budget = 64;
    defaults.max_tokens = 16;
  }
  const std::string_view text = deferkv::fuzz::as_text(data + 1, size - 1);
  json parsed;
  if (!accepts([&] { parsed = server::parse_json_body(text); })) return 0;
  const json& body = parsed;  // const: reading a missing key must not add it
  switch (endpoint) {
    case 0:
    case 1: {
      const bool chat = endpoint == 1;
      server::CompletionRequest r;
      if (accepts([&] { r = server::parse_completion_request(body, chat, defaults); })) {
        check_completion(body, r, chat, defaults);
      }
      break;
    }
    case 2: {
      server::TokenizeRequest r;
      if (accepts([&] { r = server::parse_tokenize_request(body); })) {
        require(r.content == body["content"].get<std::string>(), "the content is the body's");
        require(r.add_special == body.value("add_special", false), "add_special is the body's or false");
        require(r.with_pieces == body.value("with_pieces", false), "with_pieces is the body's or false");
      }
      break;
    }
    default: {
      std::vector<int32_t> ids;
      if (accepts([&] { ids = server::parse_detokenize_request(body, kVocab); })) {
        require(ids.size() == body["tokens"].size(), "one id per token");
        for (size_t i = 0; i < ids.size(); ++i) {
          require(ids[i] >= 0 && ids[i] < kVocab, "ids inside the vocabulary");
          require(body["tokens"][i] == ids[i], "the ids are the body's");
        }
      }
    }
  }
  return 0;
}
