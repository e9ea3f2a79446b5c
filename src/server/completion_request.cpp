#include "server/completion_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

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

int64_t read_integer(const json& value, const char* name, int64_t lo, int64_t hi) {
  if (!value.is_number_integer()) bad_request(name, fmt::format("'{}' must be an integer", name));
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    bad_request(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  }
  const int64_t v = value.get<int64_t>();
  if (v < lo || v > hi) bad_request(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, v));
  return v;
}

// The range of a number field; an open end excludes its bound.
struct Range {
  double lo, hi;
  bool lo_open = false, hi_open = false;
};

double read_number(const json& value, const char* name, Range range) {
  if (!value.is_number()) bad_request(name, fmt::format("'{}' must be a number", name));
  const double v = value.get<double>();
  const bool above = range.lo_open ? v > range.lo : v >= range.lo;
  const bool below = range.hi_open ? v < range.hi : v <= range.hi;
  if (!std::isfinite(v) || !above || !below) {
    bad_request(name, fmt::format("'{}' must be in {}{}, {}{}, got {}", name, range.lo_open ? '(' : '[', range.lo,
                                  range.hi, range.hi_open ? ')' : ']', v));
  }
  return v;
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
    if (r != "system" && r != "user" && r != "assistant") {
      bad_request("messages", fmt::format("message role must be system, user or assistant, got '{}'", r));
    }
    out.push_back({r, read_string(*content, "content")});
  }
  return out;
}

std::vector<std::string> read_stop(const json& value) {
  if (!value.is_string() && !value.is_array()) bad_request("stop", "'stop' must be a string or a list of strings");
  // An empty stop string would match at once; the single string's form let one through
  // where the list's did not (fuzz_server_request asserts it cannot).
  const json list = value.is_string() ? json::array({value}) : value;
  std::vector<std::string> out;
  for (const json& s : list) {
    if (!s.is_string() || s.get<std::string>().empty()) bad_request("stop", "'stop' must hold non-empty strings");
    out.push_back(s.get<std::string>());
  }
  if (out.size() > 16) bad_request("stop", "'stop' holds at most 16 strings");
  return out;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, bool chat, const CompletionDefaults& defaults) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (chat) {
    r.messages = read_messages(body);
  } else {
    const json* prompt = field(body, "prompt");
    if (prompt == nullptr) bad_request("prompt", "'prompt' is required");
    if (prompt->is_array()) {
      // Token ids (eval --server sends the prompts it sized so); their range is checked
      // against the vocabulary by the server.
      if (prompt->empty()) bad_request("prompt", "'prompt' must not be an empty list of tokens");
      for (const json& t : *prompt) {
        r.prompt_tokens.push_back(static_cast<int32_t>(read_integer(t, "prompt", 0, (int64_t{1} << 31) - 1)));
      }
    } else {
      if (!prompt->is_string()) bad_request("prompt", "'prompt' must be a string or a list of token ids");
      r.prompt = prompt->get<std::string>();
    }
  }
  if (const json* v = field(body, "stream")) {
    if (!v->is_boolean()) bad_request("stream", "'stream' must be true or false");
    r.stream = v->get<bool>();
  }
  r.max_tokens = defaults.max_tokens;
  // Chat's newer name wins when it has a value (a null one leaves max_tokens in force).
  const char* max_name = chat && field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
  if (const json* v = field(body, max_name)) r.max_tokens = read_integer(*v, max_name, 1, 1 << 20);
  if (const json* v = field(body, "ignore_eos")) {
    if (!v->is_boolean()) bad_request("ignore_eos", "'ignore_eos' must be true or false");
    r.ignore_eos = v->get<bool>();
  }
  SamplerParams& s = r.sampling;
  // The sampler's own ranges (SamplerParams::validate), so that an error names its field.
  if (const json* v = field(body, "temperature")) s.temperature = static_cast<float>(read_number(*v, "temperature", {0, 100}));
  if (const json* v = field(body, "top_p")) s.top_p = static_cast<float>(read_number(*v, "top_p", {0, 1, true, false}));
  if (const json* v = field(body, "min_p")) s.min_p = static_cast<float>(read_number(*v, "min_p", {0, 1, false, true}));
  if (const json* v = field(body, "top_k")) s.top_k = static_cast<int32_t>(read_integer(*v, "top_k", 0, 1 << 20));
  if (const json* v = field(body, "seed")) {
    s.seed = static_cast<uint64_t>(read_integer(*v, "seed", 0, std::numeric_limits<int64_t>::max()));
  }
  if (const json* v = field(body, "stop")) r.stop = read_stop(*v);
  r.press = defaults.press;
  r.kv_budget = defaults.kv_budget;
  r.kv_ratio = defaults.kv_ratio;
  if (const json* v = field(body, "kv_press")) r.press = read_string(*v, "kv_press");
  const json* budget = field(body, "kv_budget");
  const json* ratio = field(body, "kv_ratio");
  if (budget != nullptr && ratio != nullptr) bad_request("kv_budget", "give 'kv_budget' or 'kv_ratio', not both");
  if (budget != nullptr) {
    r.kv_budget = read_integer(*budget, "kv_budget", 1, 1 << 24);
    r.kv_ratio = -1;
  }
  if (ratio != nullptr) {
    r.kv_ratio = read_number(*ratio, "kv_ratio", {0, 0.999});
    r.kv_budget = 0;
  }
  if (r.press == "full" && (budget != nullptr || ratio != nullptr)) {
    bad_request("kv_press", "'kv_budget' and 'kv_ratio' need a 'kv_press' other than full");
  }
  try {
    s.validate();
  } catch (const Error& e) {
    bad_request("", e.what());
  }
  return r;
}

}  // namespace deferkv::server
