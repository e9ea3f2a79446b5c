#include "client/openai_client.h"

#include <chrono>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

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

Attempt send(const ClientOptions& options, const std::string& origin, const std::string& path,
             const std::string* payload) {
  httplib::Client http(origin);
  const auto timeout = std::chrono::duration<double>(options.timeout_seconds);
  http.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(std::min(timeout, std::chrono::duration<double>(30))));
  http.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  http.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  httplib::Headers headers;
  if (!options.api_key.empty()) headers.emplace("Authorization", "Bearer " + options.api_key);
  const httplib::Result result = payload != nullptr ? http.Post(path, headers, *payload, "application/json")
                                                    : http.Get(path, headers);
  Attempt a;
  if (!result) {
    a.transient = true;
    switch (result.error()) {
      case httplib::Error::Connection: a.error = "cannot connect"; break;
      case httplib::Error::Read:
        a.error = fmt::format("no answer within {} s (timed out, or the connection closed)", options.timeout_seconds);
        break;
      default: a.error = fmt::format("the request failed ({})", httplib::to_string(result.error())); break;
    }
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

}  // namespace deferkv::client
