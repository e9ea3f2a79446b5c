#pragma once
// A client of OpenAI-compatible HTTP servers (deferkv serve, llama.cpp's server, vLLM …):
// one completion request at a time per call, safe to call from many threads at once (each
// call has its own connection). Its own target, deferkv_client, beside the server's: the
// library stays free of HTTP, and the CLI (eval --server) is its only user.
#include <cstdint>
#include <optional>
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

// One streamed completion as a client sees it (stream: true, server-sent events).
struct StreamedAnswer {
  int status = 0;        // the HTTP status; 0 when no answer came
  std::string error;     // empty: the stream ended with a final chunk and [DONE]
  std::string text;      // the text of the chunks, joined
  double first_token_seconds = -1;  // from sending to the first chunk that carries text; -1: none did
  double seconds = 0;    // from sending to the end of the stream (or to the error)
  nlohmann::json usage;  // the final chunk's usage (null if the server sent none)
};

// What a server is: its first model's id and who owns it ("deferkv" for deferkv serve).
struct ServedModel {
  std::string id;
  std::string owned_by;
};

// deferkv serve says in an answer's `usage` which press it ran: "kv_press" ("full" for the
// full cache) with "kv_budget" or "kv_ratio" (null when not given), its defaults filled in.
// Empty when that is what `body` asked for (no kv_press: "full"); else what differs, for an
// error: an answer is never labelled with a press the server did not run. An answer that
// says nothing (another server, or an older deferkv) differs too.
std::string press_mismatch(const nlohmann::json& body, const nlohmann::json& usage);

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

  // POSTs `body` with stream: true set and reads the events as they come, once: no retry,
  // as a load generator times what one try costs. What went wrong (no connection, a
  // timeout, an error status or an error event, a stream cut before [DONE]) is in .error.
  StreamedAnswer stream(nlohmann::json body, bool chat) const;

  // GET /metrics at the server's root (deferkv serve, llama.cpp's --metrics): the
  // Prometheus text, or nullopt when the server has none or does not answer.
  std::optional<std::string> metrics() const;

 private:
  ClientOptions options_;
  std::string origin_;    // scheme://host:port
  std::string api_path_;  // the path prefix of the API, ".../v1"
};

}  // namespace deferkv::client
