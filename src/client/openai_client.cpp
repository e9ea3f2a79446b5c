#include "client/openai_client.h"

#include <chrono>
#include <memory>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "client/sse_events.h"
#include "deferkv/error.h"

namespace deferkv::client {
namespace {

using nlohmann::json;

// The start of a body, for an error message.
std::string excerpt(const std::string& body) {
  constexpr size_t kMax = 200;
  std::string text = body.size() > kMax ? body.substr(0, kMax) + "…" : body;
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.empty() ? "(an empty body)" : "'" + text + "'";
}

// The message of an OpenAI-shaped error body ({"error": {"message": …}}), else the excerpt.
std::string error_message(const std::string& body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error")) {
    const json& e = parsed["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return excerpt(body);
}

const json* answer_text(const json& answer, bool chat) {
  if (!answer.is_object() || !answer.contains("choices") || !answer["choices"].is_array() || answer["choices"].empty()) {
    return nullptr;
  }
  const json& choice = answer["choices"][0];
  if (!choice.is_object()) return nullptr;
  const json* text = nullptr;
  if (chat) {
    if (choice.contains("message") && choice["message"].is_object() && choice["message"].contains("content")) {
      text = &choice["message"]["content"];
    }
  } else if (choice.contains("text")) {
    text = &choice["text"];
  }
  return text != nullptr && text->is_string() ? text : nullptr;
}

// One try: the answer's body, or why there is none and whether trying again may help.
struct Attempt {
  std::string body;
  std::string error;  // empty: the body is a 200 answer
  bool transient = false;
};

}  // namespace

OpenAiClient::OpenAiClient(ClientOptions options) : options_(std::move(options)) {
  static const std::regex form(R"((https?://[^/\s]+)(/[^\s]*)?)");
  std::smatch m;
  if (!std::regex_match(options_.url, m, form)) {
    fail("--server: '{}' is not an http(s)://host[:port] URL", options_.url);
  }
  origin_ = m[1].str();
  std::string path = m[2].str();
  while (!path.empty() && path.back() == '/') path.pop_back();
  // OpenAI's clients take the base URL with /v1; llama.cpp and deferkv print theirs without.
  api_path_ = path.ends_with("/v1") ? path : path + "/v1";
}

namespace {

// A connection to `origin` with the options' timeouts.
std::unique_ptr<httplib::Client> connect(const ClientOptions& options, const std::string& origin) {
  auto http = std::make_unique<httplib::Client>(origin);
  const auto timeout = std::chrono::duration<double>(options.timeout_seconds);
  http->set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(std::min(timeout, std::chrono::duration<double>(30))));
  http->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  http->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  return http;
}

httplib::Headers auth_headers(const ClientOptions& options) {
  httplib::Headers headers;
  if (!options.api_key.empty()) headers.emplace("Authorization", "Bearer " + options.api_key);
  return headers;
}

// Why a request got no answer.
std::string no_answer(const ClientOptions& options, httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "cannot connect";
    case httplib::Error::Read:
      return fmt::format("no answer within {} s (timed out, or the connection closed)", options.timeout_seconds);
    default: return fmt::format("the request failed ({})", httplib::to_string(error));
  }
}

Attempt send(const ClientOptions& options, const std::string& origin, const std::string& path,
             const std::string* payload) {
  const auto http = connect(options, origin);
  const httplib::Headers headers = auth_headers(options);
  const httplib::Result result = payload != nullptr ? http->Post(path, headers, *payload, "application/json")
                                                    : http->Get(path, headers);
  Attempt a;
  if (!result) {
    a.transient = true;
    a.error = no_answer(options, result.error());
    return a;
  }
  if (result->status != 200) {
    a.transient = result->status == 408 || result->status == 429 || result->status >= 500;
    a.error = fmt::format("HTTP {}: {}", result->status, error_message(result->body));
    return a;
  }
  a.body = result->body;
  return a;
}

}  // namespace

ServedModel OpenAiClient::served_model() const {
  const std::string path = api_path_ + "/models";
  const Attempt a = send(options_, origin_, path, nullptr);
  if (!a.error.empty()) fail("{}{}: {}", origin_, path, a.error);
  const json list = json::parse(a.body, nullptr, false);
  if (!list.is_object() || !list.contains("data") || !list["data"].is_array() || list["data"].empty() ||
      !list["data"][0].is_object() || !list["data"][0].contains("id") || !list["data"][0]["id"].is_string()) {
    fail("{}{}: the answer is not an OpenAI model list: {}", origin_, path, excerpt(a.body));
  }
  const json& model = list["data"][0];
  ServedModel served{model["id"].get<std::string>(), ""};
  if (model.contains("owned_by") && model["owned_by"].is_string()) served.owned_by = model["owned_by"].get<std::string>();
  return served;
}

json OpenAiClient::complete(const json& body, bool chat) const {
  const std::string path = api_path_ + (chat ? "/chat/completions" : "/completions");
  const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
  double delay = options_.retry_delay_seconds;
  for (int attempt = 1;; ++attempt) {
    const Attempt a = send(options_, origin_, path, &payload);
    if (a.error.empty()) {
      json answer = json::parse(a.body, nullptr, false);
      if (answer_text(answer, chat) == nullptr) {
        fail("{}{}: the answer is not an OpenAI {}completion (no choices[0].{}): {}", origin_, path, chat ? "chat " : "",
             chat ? "message.content" : "text", excerpt(a.body));
      }
      return answer;
    }
    if (!a.transient || attempt > options_.retries) {
      fail("{}{}: {}{}", origin_, path, a.error, attempt > 1 ? fmt::format(" (tried {} times)", attempt) : "");
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay *= 2;
  }
}

StreamedAnswer OpenAiClient::stream(json body, bool chat) const {
  const std::string path = api_path_ + (chat ? "/chat/completions" : "/completions");
  body["stream"] = true;
  StreamedAnswer answer;
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  SseReader reader;
  std::string raw;  // an error status's body
  bool done = false;
  bool finished = false;  // a chunk with a finish_reason came
  // One event's payload; false stops reading (an error event, or events after [DONE]).
  auto on_event = [&](const std::string& payload) {
    if (done) {
      answer.error = "events after data: [DONE]";
      return false;
    }
    if (payload == "[DONE]") {
      done = true;
      return true;
    }
    const json event = json::parse(payload, nullptr, false);
    if (event.is_object() && event.contains("error")) {
      answer.error = "an error event: " + error_message(payload);
      return false;
    }
    if (!event.is_object() || !event.contains("choices") || !event["choices"].is_array() || event["choices"].empty() ||
        !event["choices"][0].is_object()) {
      answer.error = "an event that is not a completion chunk: " + excerpt(payload);
      return false;
    }
    const json& choice = event["choices"][0];
    const json* text = chat ? (choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content")
                                   ? &choice["delta"]["content"]
                                   : nullptr)
                            : (choice.contains("text") ? &choice["text"] : nullptr);
    if (text != nullptr && text->is_string() && !text->get_ref<const std::string&>().empty()) {
      if (answer.first_token_seconds < 0) answer.first_token_seconds = since_start();
      answer.text += text->get_ref<const std::string&>();
    }
    if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) {
      finished = true;
      if (event.contains("usage")) answer.usage = event["usage"];
    }
    return true;
  };

  const auto http = connect(options_, origin_);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = auth_headers(options_);
  req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      raw.append(data, size);
      return true;
    }
    for (const std::string& payload : reader.feed(std::string_view(data, size))) {
      if (!on_event(payload)) return false;
    }
    return true;
  };
  const httplib::Result result = http->send(req);
  answer.seconds = since_start();
  answer.status = status;
  if (!answer.error.empty()) return answer;
  if (!result) {
    answer.error = no_answer(options_, result.error());
  } else if (status != 200) {
    answer.error = fmt::format("HTTP {}: {}", status, error_message(raw));
  } else if (!done || !finished) {
    answer.error = !finished ? "the stream ended without a final chunk (finish_reason)" : "the stream ended without data: [DONE]";
  }
  return answer;
}

std::string press_mismatch(const json& body, const json& usage) {
  auto field = [](const json& o, const char* name) { return o.is_object() && o.contains(name) ? o[name] : json(); };
  auto describe = [&](const json& o, const json& press) {
    std::string d = press.is_string() ? press.get<std::string>() : press.dump();
    if (!field(o, "kv_budget").is_null()) d += " with kv_budget " + field(o, "kv_budget").dump();
    if (!field(o, "kv_ratio").is_null()) d += " with kv_ratio " + field(o, "kv_ratio").dump();
    return d;
  };
  const json asked = body.contains("kv_press") ? body["kv_press"] : json("full");
  if (!usage.is_object() || !usage.contains("kv_press")) {
    return fmt::format("the answer does not say which press the server ran (usage.kv_press), so it cannot count as {}",
                       describe(body, asked));
  }
  if (usage["kv_press"] != asked || field(usage, "kv_budget") != field(body, "kv_budget") ||
      field(usage, "kv_ratio") != field(body, "kv_ratio")) {
    return fmt::format("the server ran {}, not {} as asked", describe(usage, usage["kv_press"]), describe(body, asked));
  }
  return "";
}

std::optional<std::string> OpenAiClient::metrics() const {
  const std::string root = api_path_.substr(0, api_path_.size() - 3);  // without "/v1"
  const Attempt a = send(options_, origin_, root + "/metrics", nullptr);
  if (!a.error.empty()) return std::nullopt;
  return a.body;
}

}  // namespace deferkv::client
