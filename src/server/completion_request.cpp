#include "server/completion_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "deferkv/generation_params.h"
#include "server/api_error.h"

namespace deferkv::server {
namespace {

using nlohmann::json;

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string read_string(const json& value, const char* name) {
  if (!value.is_string()) bad_request(name, fmt::format("'{}' must be a string", name));
  return value.get<std::string>();
}

bool read_bool(const json& value, const char* name) {
  if (!value.is_boolean()) bad_request(name, fmt::format("'{}' must be true or false", name));
  return value.get<bool>();
}

// An integer JSON number that fits [lo, hi]; the generation parameters' own ranges are the
// engine's (generation_params.h), so for them [lo, hi] is only what their type holds.
int64_t read_integer(const json& value, const char* name, int64_t lo, int64_t hi) {
  if (!value.is_number_integer()) bad_request(name, fmt::format("'{}' must be an integer", name));
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    bad_request(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  }
  const int64_t v = value.get<int64_t>();
  if (v < lo || v > hi) bad_request(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, v));
  return v;
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

double read_number(const json& value, const char* name) {
  if (!value.is_number()) bad_request(name, fmt::format("'{}' must be a number", name));
  return value.get<double>();
}

// A chat message's content: a string, or OpenAI's list of content parts, of which the text
// ones are taken, concatenated; any other part (image_url, input_audio, file) is refused
// by its type, as the models served read text only.
std::string read_content(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    bad_request("messages", "a message's 'content' must be a string or a list of content parts");
  }
  std::string text;
  for (const json& part : content) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      bad_request("messages", "each content part must be an object with a 'type'");
    }
    if (type->get<std::string>() != "text") {
      bad_request("messages", fmt::format("content parts of type '{}' are not supported: the model reads text only "
                                          "(send parts of type 'text')", type->get<std::string>()));
    }
    const json* part_text = field(part, "text");
    if (part_text == nullptr || !part_text->is_string()) bad_request("messages", "a text content part needs a string 'text'");
    text += part_text->get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> read_messages(const json& body) {
  const json* messages = field(body, "messages");
  if (messages == nullptr) bad_request("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) bad_request("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> out;
  for (const json& m : *messages) {
    if (!m.is_object()) bad_request("messages", "each message must be an object with 'role' and 'content'");
    const json* role = field(m, "role");
    const json* content = field(m, "content");
    if (role == nullptr || content == nullptr) bad_request("messages", "each message needs 'role' and 'content'");
    const std::string r = read_string(*role, "role");
    check_role(r);
    out.push_back({r, read_content(*content)});
  }
  return out;
}

// Token ids (eval --server sends the prompts it sized so); their range is checked against
// the vocabulary by the server.
std::vector<int32_t> read_token_ids(const json& ids) {
  if (ids.empty()) bad_request("prompt", "'prompt' must not be an empty list of tokens");
  std::vector<int32_t> out;
  for (const json& t : ids) out.push_back(static_cast<int32_t>(read_integer(t, "prompt", 0, kInt32Max)));
  return out;
}

// OpenAI's four shapes: a string, a list of token ids, a list of strings, a list of lists
// of token ids (the last two: one prompt each).
std::vector<PromptInput> read_prompts(const json& body) {
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr) bad_request("prompt", "'prompt' is required");
  if (prompt->is_string()) return {{prompt->get<std::string>(), {}}};
  const char* shapes = "'prompt' must be a string, a list of token ids, a list of strings or a list of lists of token ids";
  if (!prompt->is_array()) bad_request("prompt", shapes);
  if (prompt->empty() || (*prompt)[0].is_number()) return {{"", read_token_ids(*prompt)}};
  std::vector<PromptInput> out;
  for (const json& p : *prompt) {
    if (p.is_string()) {
      out.push_back({p.get<std::string>(), {}});
    } else if (p.is_array()) {
      out.push_back({"", read_token_ids(p)});
    } else {
      bad_request("prompt", shapes);
    }
  }
  return out;
}

std::vector<std::string> read_stop(const json& value) {
  if (!value.is_string() && !value.is_array()) bad_request("stop", "'stop' must be a string or a list of strings");
  const json list = value.is_string() ? json::array({value}) : value;
  std::vector<std::string> out;
  for (const json& s : list) {
    if (!s.is_string()) bad_request("stop", "'stop' must hold strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Fields OpenAI defines that the server does not implement: their neutral values are
// taken (clients send them), any other value is refused by name rather than ignored.
void refuse_unimplemented(const json& body) {
  if (const json* n = field(body, "n")) {
    if (read_integer(*n, "n", 1, kInt64Max) != 1) {
      bad_request("n", "'n' above 1 is not supported: send n requests (the server runs them batched)");
    }
  }
  if (const json* echo = field(body, "echo"); echo != nullptr && read_bool(*echo, "echo")) {
    bad_request("echo", "'echo' is not supported");
  }
  if (const json* format = field(body, "response_format")) {
    const json* type = format->is_object() ? field(*format, "type") : nullptr;
    if (type == nullptr || !type->is_string()) bad_request("response_format", "'response_format' must be {\"type\": ...}");
    if (type->get<std::string>() != "text") {
      bad_request("response_format", fmt::format("'response_format' of type '{}' is not supported (only 'text')",
                                                 type->get<std::string>()));
    }
  }
}

// completions: `logprobs: k` (0 to 20); chat: `logprobs: true` with `top_logprobs: k`.
int32_t read_logprobs(const json& body, bool chat) {
  const json* logprobs = field(body, "logprobs");
  if (!chat) {
    return logprobs == nullptr ? -1 : static_cast<int32_t>(read_integer(*logprobs, "logprobs", 0, kMaxTopLogprobs));
  }
  const bool wanted = logprobs != nullptr && read_bool(*logprobs, "logprobs");
  const json* top = field(body, "top_logprobs");
  if (top == nullptr) return wanted ? 0 : -1;
  const auto k = static_cast<int32_t>(read_integer(*top, "top_logprobs", 0, kMaxTopLogprobs));
  if (!wanted) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  return k;
}

// temperature, top_p, min_p, top_k and seed, each checked.
SamplerParams read_sampling(const json& body) {
  SamplerParams s;
  if (const json* v = field(body, "temperature")) s.temperature = static_cast<float>(read_number(*v, "temperature"));
  if (const json* v = field(body, "top_p")) s.top_p = static_cast<float>(read_number(*v, "top_p"));
  if (const json* v = field(body, "min_p")) s.min_p = static_cast<float>(read_number(*v, "min_p"));
  if (const json* v = field(body, "top_k")) s.top_k = static_cast<int32_t>(read_integer(*v, "top_k", -kInt32Max, kInt32Max));
  if (const json* v = field(body, "seed")) {
    const int64_t seed = read_integer(*v, "seed", kInt64Min, kInt64Max);
    check_seed(seed);
    s.seed = static_cast<uint64_t>(seed);
  }
  check_sampling(s);
  return s;
}

// kv_context (and kv_context_extend): a request that continues after a stored context
// takes no press of its own, the context's having done its work.
void read_context_fields(const json& body, CompletionRequest& r) {
  if (const json* v = field(body, "kv_context_extend")) r.kv_context_extend = read_bool(*v, "kv_context_extend");
  if (r.kv_context_extend && field(body, "kv_context") == nullptr) {
    bad_request("kv_context_extend", "'kv_context_extend' extends the context named by 'kv_context': none was given");
  }
  if (r.kv_context_extend && r.prompts.size() > 1) {
    bad_request("kv_context_extend", "'kv_context_extend' extends a context by one prompt, not a list of prompts");
  }
  const json* v = field(body, "kv_context");
  if (v == nullptr) return;
  r.kv_context = read_string(*v, "kv_context");
  if (r.kv_context.empty()) bad_request("kv_context", "'kv_context' must be a context id (ctx-...), not empty");
  for (const char* name : {"kv_press", "kv_budget", "kv_ratio"}) {
    if (field(body, name) != nullptr) {
      bad_request(name, fmt::format("'{}' cannot be given with 'kv_context': the context was compressed when it "
                                    "was made, and its press has done its work", name));
    }
  }
  r.press = "full";
  r.kv_budget = 0;
  r.kv_ratio = -1;
}

// kv_press and one of kv_budget or kv_ratio, over the server's defaults.
void read_press_fields(const json& body, CompletionRequest& r) {
  if (const json* v = field(body, "kv_press")) r.press = read_string(*v, "kv_press");
  const json* budget = field(body, "kv_budget");
  const json* ratio = field(body, "kv_ratio");
  std::optional<int64_t> given_budget;
  std::optional<double> given_ratio;
  if (budget != nullptr) given_budget = read_integer(*budget, "kv_budget", kInt64Min, kInt64Max);
  if (ratio != nullptr) given_ratio = read_number(*ratio, "kv_ratio");
  check_budget(r.press, given_budget, given_ratio);
  if (given_budget) {
    r.kv_budget = *given_budget;
    r.kv_ratio = -1;
  }
  if (given_ratio) {
    r.kv_ratio = *given_ratio;
    r.kv_budget = 0;
  }
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, bool chat, const CompletionDefaults& defaults) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  try {
    if (chat) {
      r.messages = read_messages(body);
    } else {
      r.prompts = read_prompts(body);
    }
    if (const json* v = field(body, "stream")) r.stream = read_bool(*v, "stream");
    if (r.stream && r.prompts.size() > 1) {
      bad_request("prompt", "a list of several prompts is not supported with 'stream': true (send one request each)");
    }
    refuse_unimplemented(body);
    r.logprobs = read_logprobs(body, chat);
    if (defaults.max_tokens > 0) r.max_tokens = defaults.max_tokens;
    // Chat's newer name wins when it has a value (a null one leaves max_tokens in force).
    const char* max_name =
        chat && field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
    if (const json* v = field(body, max_name)) {
      r.max_tokens = read_integer(*v, max_name, kInt64Min, kInt64Max);
      check_max_tokens(*r.max_tokens, max_name);
    }
    if (const json* v = field(body, "ignore_eos")) r.ignore_eos = read_bool(*v, "ignore_eos");
    r.sampling = read_sampling(body);
    if (const json* v = field(body, "stop")) r.stop = read_stop(*v);
    check_stop(r.stop);
    r.press = defaults.press;
    r.kv_budget = defaults.kv_budget;
    r.kv_ratio = defaults.kv_ratio;
    read_context_fields(body, r);
    if (r.kv_context.empty()) read_press_fields(body, r);
  } catch (const ParameterError& e) {
    bad_request(e.param() == "press" ? "kv_press" : e.param(), e.what());
  }
  return r;
}

}  // namespace deferkv::server
