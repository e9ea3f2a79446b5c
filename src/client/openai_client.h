#pragma once
// A client of OpenAI-compatible HTTP servers (deferkv serve, llama.cpp's server, vLLM …):
// one completion request at a time per call, safe to call from many threads at once (each
// call has its own connection). Its own target, deferkv_client, beside the server's: the
// library stays free of HTTP, and the CLI (eval --server) is its only user.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace deferkv::client {

struct ClientOptions {
  std::string url;             // http(s)://host[:port][/prefix]; the API is under /v1 (added unless the URL ends in /v1)
  std::string api_key;         // sent as "Authorization: Bearer <key>" when not empty
  double timeout_seconds = 600;  // for one answer to come
  int retries = 2;             // more tries after a connection failure, a timeout, 429 or a 5xx status
  double retry_delay_seconds = 1;  // before the first retry; doubled for each next one
};

// What a server is: its first model's id and who owns it ("deferkv" for deferkv serve).
struct ServedModel {
  std::string id;
  std::string owned_by;
};

class OpenAiClient {
 public:
  // Errors: a URL that is not http(s)://host[:port][/path].
  explicit OpenAiClient(ClientOptions options);

  const std::string& url() const { return options_.url; }

  // GET /v1/models. Errors name the URL: unreachable, an error status, or an answer that is
  // not a model list.
  ServedModel served_model() const;

  // POSTs `body` to /v1/completions (chat: /v1/chat/completions) and returns the parsed
  // answer, retrying as the options say. Errors name the URL and what went wrong: no
  // connection, a timeout, the server's error message and status, or an answer that is not
  // JSON with choices[0].text (chat: choices[0].message.content).
  nlohmann::json complete(const nlohmann::json& body, bool chat) const;

 private:
  ClientOptions options_;
  std::string origin_;    // scheme://host:port
  std::string api_path_;  // the path prefix of the API, ".../v1"
};

}  // namespace deferkv::client
