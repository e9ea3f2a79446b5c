#include "server/http_server.h"

#include <chrono>
#include <filesystem>
#include <random>

#include <sys/socket.h>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "base/thread_pool.h"
#include "deferkv/compressed_context.h"
#include "deferkv/error.h"
#include "deferkv/press.h"
#include "deferkv/tokenizer.h"
#include "server/api_error.h"
#include "server/batch_scheduler.h"
#include "server/client_connection.h"
#include "server/completion_plan.h"
#include "server/completion_stream.h"
#include "server/connection_threads.h"
#include "server/request_body.h"
#include "server/token_requests.h"

namespace deferkv::server {
namespace {

using nlohmann::json;

// How often a request's thread looks whether its client has gone while it waits for the
// request to start or to end (a stream also notices at its next write).
constexpr std::chrono::milliseconds kClientCheckPeriod{20};
// Connection threads: one per open connection (see connection_threads.h), at most this many.
constexpr size_t kMaxConnectionThreads = 1024;
// How long stop() waits for the answers of the requests it cancelled to be written (a
// client that reads nothing holds its write for httplib's write timeout, 5 s).
constexpr std::chrono::seconds kShutdownWriteGrace{10};

// Text that is not UTF-8 (an error message quoting a client's bytes, a token piece that is
// part of a character) is written with U+FFFD rather than failing the response.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// One server-sent event; false when the client is gone.
bool write_event(httplib::DataSink& sink, const json& event) {
  const std::string frame = "data: " + dump(event) + "\n\n";
  return sink.write(frame.data(), frame.size());
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& type, const std::string& param,
                const std::string& code, const std::string& message) {
  send_json(res, status, error_body(message, type, param, code));
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The finish reason of a request that finished (GenerationEnd::kFinished); any other end is
// an error, never a finish reason.
const char* finish_reason(const CompletionStream& stream) {
  if (stream.stopped_by_string()) return "stop";
  switch (stream.outcome().stop) {
    case StopReason::kEndOfGeneration: return "stop";
    case StopReason::kCallback: return "stop";
    case StopReason::kTokenLimit:
    case StopReason::kContextFull: return "length";
  }
  return "length";
}

// The press the request ran with, the server's defaults filled in ("full" when none), echoed
// in `usage` so that a client labels its answer with the press that made it
// (eval --server and bench-serve check it).
json press_json(const CompletionRequest& r) {
  const bool full = r.press == "full";
  return {{"kv_press", r.press},
          {"kv_budget", !full && r.kv_ratio < 0 && r.kv_budget > 0 ? json(r.kv_budget) : json()},
          {"kv_ratio", !full && r.kv_ratio >= 0 ? json(r.kv_ratio) : json()}};
}

json usage_json(const GenerationUsage& u, const json& press) {
  json usage = {{"prompt_tokens", u.prompt_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"kv_entries_kept", u.kv_entries_kept},
          {"kv_bytes", u.kv_bytes},
          {"kv_peak_bytes", u.kv_peak_bytes},
          {"capture_ms", u.capture_ms},
          {"eviction_ms", u.eviction_ms},
          {"prefill_ms", u.prefill_ms},
          {"decode_ms", u.decode_ms}};
  usage.update(press);
  return usage;
}

void send_shutting_down(httplib::Response& res, const std::string& message) {
  send_error(res, 503, "unavailable_error", "", "server_shutting_down", message);
}

// Why a request that did not finish ended, for its error.
std::string shutdown_message(const GenerationOutcome& o) {
  return o.started ? fmt::format("the server is shutting down; the request was stopped after {} generated tokens",
                                 o.usage.completion_tokens)
                   : "the server is shutting down; the request had not started";
}

// The answer to a request that ended without finishing, before its headers were sent.
void send_unfinished(httplib::Response& res, const GenerationOutcome& o) {
  switch (o.end) {
    case GenerationEnd::kShutdown: return send_shutting_down(res, shutdown_message(o));
    case GenerationEnd::kFailed: return send_error(res, 500, "server_error", "", "", o.error);
    // Its client has gone and reads nothing; the status is for the log only.
    case GenerationEnd::kCancelled: return send_error(res, 500, "server_error", "", "request_cancelled", "cancelled");
    case GenerationEnd::kFinished: break;
  }
}

// Several prompts' usage, summed into one response's.
void add_usage(GenerationUsage& total, const GenerationUsage& u) {
  total.prompt_tokens += u.prompt_tokens;
  total.cached_tokens += u.cached_tokens;
  total.completion_tokens += u.completion_tokens;
  total.kv_entries_kept += u.kv_entries_kept;
  total.kv_bytes += u.kv_bytes;
  total.kv_peak_bytes += u.kv_peak_bytes;
  total.capture_ms += u.capture_ms;
  total.eviction_ms += u.eviction_ms;
  total.prefill_ms += u.prefill_ms;
  total.decode_ms += u.decode_ms;
}

// A response's id, unique across restarts (clients and logs key on it): the kind, then 96
// random bits.
std::string completion_id(bool chat) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:08x}", chat ? "chatcmpl" : "cmpl", rng(), static_cast<uint32_t>(rng()));
}

// A token as OpenAI's logprobs name it: its text (the bytes it stands for; part of a
// character comes out as U+FFFD in the JSON) and, for chat, those bytes.
json chat_token_json(const Tokenizer& tok, int32_t id, float logprob) {
  const std::string piece = tok.token_piece(id);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(c);
  return {{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
}

// The logprobs of a choice, or of a chunk's tokens, in the endpoint's shape:
//   completions: {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}], "text_offset"}
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
json logprobs_json(bool chat, const Tokenizer& tok, const std::vector<TokenLogprobs>& logprobs,
                   const std::vector<size_t>& offsets) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprobs& t : logprobs) {
      json entry = chat_token_json(tok, t.token, t.logprob);
      entry["top_logprobs"] = json::array();
      for (const auto& [id, lp] : t.top) entry["top_logprobs"].push_back(chat_token_json(tok, id, lp));
      content.push_back(entry);
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array();
  for (const TokenLogprobs& t : logprobs) {
    tokens.push_back(tok.token_piece(t.token));
    token_logprobs.push_back(t.logprob);
    json alternatives = json::object();
    for (const auto& [id, lp] : t.top) alternatives.emplace(tok.token_piece(id), lp);
    top.push_back(alternatives);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

// One choice of a response or of a stream chunk: the text as `text` (completions) or as
// the assistant's message / delta (chat); `logprobs` null unless asked for.
json choice_json(bool chat, bool chunk, size_t index, const std::string& text, const json& finish,
                 const json& logprobs = nullptr) {
  json c = {{"index", index}, {"finish_reason", finish}, {"logprobs", logprobs}};
  if (!chat) {
    c["text"] = text;
  } else if (chunk) {
    c["delta"] = text.empty() ? json::object() : json{{"content", text}};
  } else {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return c;
}

// A compressed context's id: "ctx-" and 96 random bits, as completion ids.
std::string context_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("ctx-{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

// A deferred context's pool and the budget each question's step d chooses from it; null for
// any other context.
json deferred_json(const CompressedContext& c) {
  const DeferredEviction* d = c.deferred();
  if (d == nullptr) return nullptr;
  // The pool as the press was given it (all, 4x, 512): the value of pool= in its description.
  std::string pool = "all";
  if (const size_t at = c.press().find("pool="); at != std::string::npos) {
    const size_t from = at + 5;
    pool = c.press().substr(from, c.press().find(',', from) - from);
  }
  return {{"pool", pool}, {"pool_entries", c.kept_entries()}, {"kv_budget", d->budget.describe()},
          {"budget_entries_per_head", d->budget.resolve(d->prompt_end)}};
}

// A compressed context as the API shows it (OpenAI-like: id and object first); one spilled to
// --context-dir shows its id only until a request loads it back.
json context_json(const std::string& id, const CompressedContext* context, int64_t running, const std::string& model) {
  if (context == nullptr) return {{"id", id}, {"object", "kv_context"}, {"model", model}, {"resident", false}};
  const CompressedContext& c = *context;
  return {{"id", id},
          {"resident", true},
          {"object", "kv_context"},
          {"model", model},
          {"prompt_tokens", c.tokens().size()},
          {"n_past", c.n_past()},
          {"kv_entries_kept", c.kept_entries()},
          {"kv_bytes", c.bytes()},
          {"kv_press", c.press()},
          {"cache_type_k", c.cache_type_k()},
          {"cache_type_v", c.cache_type_v()},
          {"mode", context_mode_name(c.mode())},
          {"deferred", deferred_json(c)},
          {"requests_running", running}};
}

[[noreturn]] void context_not_found(const std::string& id) {
  throw ApiError(404, "invalid_request_error", "kv_context", "context_not_found",
                 fmt::format("the context '{}' does not exist: it was never made, was deleted, or was dropped to make "
                             "room in the KV memory (POST /v1/contexts makes it again)", id));
}

json model_json(const std::string& name, const ModelConfig& c) {
  return {{"id", name},
          {"object", "model"},
          {"created", unix_time()},
          {"owned_by", "deferkv"},
          {"meta", {{"n_ctx_train", c.n_ctx_train}, {"n_vocab", c.n_vocab}}}};
}

// One choice of a completion: its text on the way, and its request in the scheduler.
struct Choice {
  std::shared_ptr<CompletionStream> stream;
  RequestId id = 0;
};

// What a completion's reply needs, blocking or streamed (a stream's provider holds it until
// the stream's end).
struct CompletionReply {
  Scheduler* scheduler;
  const Tokenizer* tok;
  bool chat;
  int32_t logprobs;  // as asked (-1: none)
  json head;         // id, object, created, model: the start of the response and of each chunk
  json press;        // what usage echoes
  ClientConnection client;
  std::string extended_context{};  // kv_context_extend: the id the new context gets, "" none
  std::vector<Choice> choices{};
  bool cancelled = false;  // its client left

  void cancel_all() const {
    for (const Choice& c : choices) scheduler->cancel(c.id);
  }
  // A client that leaves before its answer (a non-streamed request's, or a stream's first
  // event) cancels its requests, as a stream's does at its next write.
  void cancel_if_client_left() {
    if (!cancelled && client.closed()) {
      cancel_all();
      cancelled = true;
    }
  }
};

// A request the scheduler refused, as the answer its cause calls for (docs/serving.md,
// "Statuses"): nothing of it runs.
[[noreturn]] void refuse(const SubmitError& e) {
  switch (e.refusal) {
    case SubmitRefusal::kShuttingDown:
      throw ApiError(503, "unavailable_error", "", "server_shutting_down", "the server is shutting down");
    case SubmitRefusal::kQueueFull: throw ApiError(429, "requests", "", "rate_limit_exceeded", e.what());
    case SubmitRefusal::kKvMemoryExceeded: bad_request("max_tokens", e.what(), "kv_memory_exceeded");
  }
  throw ApiError(500, "server_error", "", "", e.what());  // not a refusal the scheduler has
}

// Queues one generation a prompt (OpenAI's list of prompts: one choice each, run side by
// side); a refusal of any cancels those queued before it.
void submit_choices(CompletionReply& reply, CompletionPlan plan, const std::vector<std::string>& stop,
                    ServerMetrics& metrics) {
  for (GenerationRequest& g : plan.generations) {
    auto stream = std::make_shared<CompletionStream>(*reply.tok, DecodeStart::kContinuation, stop);
    GenerationCallbacks callbacks;
    callbacks.on_start = [stream] { stream->start(); };
    callbacks.on_token = [stream](int32_t token) { return stream->push(token); };
    if (reply.logprobs >= 0) callbacks.on_logprobs = [stream](const TokenLogprobs& lp) { stream->push_logprobs(lp); };
    // The metrics first, so a client that has its response finds its request counted.
    callbacks.on_finish = [&metrics, stream](const GenerationOutcome& outcome) {
      metrics.record_request(outcome.usage, stream->first_token_seconds().value_or(0), stream->seconds_since_start(),
                             stream->first_token_seconds().has_value());
      stream->finish(outcome);
    };
    try {
      reply.choices.push_back({stream, reply.scheduler->submit(std::move(g), std::move(callbacks))});
    } catch (const SubmitError& e) {
      reply.cancel_all();
      refuse(e);
    } catch (const std::exception& e) {  // outside the scheduler's contract: a bug, not the request's fault
      reply.cancel_all();
      spdlog::error("submit failed: {}", e.what());
      throw ApiError(500, "server_error", "", "", e.what());
    }
  }
}

// The whole response once every choice has finished; one that did not fails it.
void reply_blocking(CompletionReply& reply, httplib::Response& res) {
  json out = reply.head;
  out["choices"] = json::array();
  GenerationUsage total;
  for (size_t i = 0; i < reply.choices.size(); ++i) {
    CompletionStream& stream = *reply.choices[i].stream;
    std::string text;
    std::vector<TokenLogprobs> logprobs;
    std::vector<size_t> offsets;
    for (;;) {
      CompletionStream::Update u = stream.wait_for_update(kClientCheckPeriod);
      text += u.text;
      logprobs.insert(logprobs.end(), u.logprobs.begin(), u.logprobs.end());
      offsets.insert(offsets.end(), u.text_offsets.begin(), u.text_offsets.end());
      if (u.ended) break;
      reply.cancel_if_client_left();
    }
    const GenerationOutcome& outcome = stream.outcome();
    if (outcome.end != GenerationEnd::kFinished) {
      reply.cancel_all();
      return send_unfinished(res, outcome);
    }
    out["choices"].push_back(
        choice_json(reply.chat, false, i, text, finish_reason(stream),
                    reply.logprobs >= 0 ? logprobs_json(reply.chat, *reply.tok, logprobs, offsets) : json()));
    add_usage(total, outcome.usage);
  }
  out["usage"] = usage_json(total, reply.press);
  if (!reply.extended_context.empty()) out["kv_context"] = reply.extended_context;
  send_json(res, 200, out);
}

// The last event of a stream: the finish reason and usage, or an error in OpenAI's shape
// (then [DONE] all the same), never a finish reason for a request that did not finish;
// nothing for a client that is gone.
void end_stream(const CompletionReply& reply, httplib::DataSink& sink, const json& chunk_logprobs) {
  const CompletionStream& stream = *reply.choices[0].stream;
  const GenerationOutcome& outcome = stream.outcome();
  json last = reply.head;
  switch (outcome.end) {
    case GenerationEnd::kFinished:
      last["choices"] = json::array({choice_json(reply.chat, true, 0, "", finish_reason(stream), chunk_logprobs)});
      last["usage"] = usage_json(outcome.usage, reply.press);
      if (!reply.extended_context.empty()) last["kv_context"] = reply.extended_context;
      break;
    case GenerationEnd::kShutdown:
      last = error_body(shutdown_message(outcome), "unavailable_error", "", "server_shutting_down");
      break;
    case GenerationEnd::kFailed: last = error_body(outcome.error, "server_error", "", ""); break;
    case GenerationEnd::kCancelled: sink.done(); return;
  }
  static const std::string kDone = "data: [DONE]\n\n";
  if (write_event(sink, last)) sink.write(kDone.data(), kDone.size());
  sink.done();
}

// One step of a stream's provider: waits for the next text and writes it as a chunk, or
// ends the stream. False once the client is gone (its request is cancelled).
bool stream_step(CompletionReply& reply, httplib::DataSink& sink, bool& first) {
  const Choice& choice = reply.choices[0];
  const CompletionStream::Update u = choice.stream->wait_for_update(kClientCheckPeriod);
  // A chunk's logprobs are those of the tokens whose text it carries; at the end the rest
  // go with the last chunk.
  json chunk_logprobs = reply.logprobs >= 0 && !u.logprobs.empty()
                            ? logprobs_json(reply.chat, *reply.tok, u.logprobs, u.text_offsets)
                            : json();
  if (!u.text.empty() || (first && reply.chat)) {
    json chunk = reply.head;
    json c = choice_json(reply.chat, true, 0, u.text, nullptr, chunk_logprobs);
    chunk_logprobs = nullptr;
    if (reply.chat && first) c["delta"]["role"] = "assistant";
    chunk["choices"] = json::array({c});
    first = false;
    if (!write_event(sink, chunk)) {
      reply.scheduler->cancel(choice.id);  // the client is gone
      return false;
    }
  } else if (!u.ended && reply.client.closed()) {  // gone while nothing was written (a long prefill)
    reply.scheduler->cancel(choice.id);
    return false;
  }
  if (u.ended) end_stream(reply, sink, chunk_logprobs);
  return true;
}

// A stream (one choice): its status goes with its headers, before its first event, so they
// wait until the request leaves the queue; one that ends there (shutdown) gets its error
// status, as a non-streamed request does. `answering` is held until the stream's end.
void reply_streamed(std::shared_ptr<CompletionReply> reply, std::shared_ptr<void> answering, httplib::Response& res) {
  CompletionStream& stream = *reply->choices[0].stream;
  while (!stream.wait_for_start(kClientCheckPeriod)) reply->cancel_if_client_left();
  if (!stream.started()) return send_unfinished(res, stream.outcome());
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [reply, answering, first = true](size_t, httplib::DataSink& sink) mutable { return stream_step(*reply, sink, first); },
      [reply](bool) { reply->scheduler->cancel(reply->choices[0].id); });  // finished already: ignored
}

}  // namespace

int64_t queue_limit(const ServerOptions& options) {
  return options.max_queue > 0 ? options.max_queue : std::max(kMinDefaultQueue, kDefaultQueuePerSlot * options.n_slots);
}

std::unique_ptr<Scheduler> make_batch_scheduler(std::shared_ptr<const Model> model, const ServerOptions& options) {
  BatchEngineOptions o;
  o.max_sequences = options.n_slots;
  o.kv_capacity_bytes = options.kv_memory_bytes;
  o.session.n_ctx = options.n_ctx;
  o.context_dir = options.context_dir;
  return std::make_unique<BatchScheduler>(std::move(model), std::make_shared<ThreadPool>(options.threads), o,
                                          queue_limit(options));
}

HttpServer::HttpServer(const ServerOptions& options, SchedulerFactory make_scheduler)
    : options_(options), make_scheduler_(std::move(make_scheduler)), http_(std::make_unique<httplib::Server>()) {
  model_name_ = std::filesystem::path(options.model_path).filename().string();
  add_connection_handling();
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

template <typename Handler>
void HttpServer::guarded(httplib::Response& res, Handler&& handler) {
  switch (state_.load()) {
    case State::kLoading: return send_error(res, 503, "unavailable_error", "", "", "the model is loading");
    case State::kStopping: return send_shutting_down(res, "the server is shutting down");
    case State::kReady: break;
  }
  try {
    handler();
  } catch (const ApiError& e) {
    send_error(res, e.status, e.type, e.param, e.code, e.what());
  } catch (const Error& e) {
    send_error(res, 400, "invalid_request_error", "", "", e.what());
  } catch (const std::exception& e) {
    spdlog::error("request failed: {}", e.what());
    send_error(res, 500, "server_error", "", "", e.what());
  }
}

void HttpServer::add_connection_handling() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  // A connection holds its thread while its request waits for a slot or streams, so a
  // thread starts for each connection that finds none idle: /health never waits behind them.
  s.new_task_queue = [] { return new ConnectionThreads(kMaxConnectionThreads); };
  s.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = sock;
  });
  // httplib's own errors (404, 413 body too large, 400 unreadable request) in OpenAI's shape.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404   ? "no such endpoint"
                                : res.status == 413 ? "the request body is over the server's size limit"
                                                    : fmt::format("HTTP status {}", res.status);
    send_error(res, res.status, "invalid_request_error", "", "", message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  // CORS as llama-server answers it, so that a page on another origin can call the API:
  // every response allows the caller's origin, and a preflight (OPTIONS) gets the methods
  // and headers allowed, whatever its path.
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
    res.status = 200;
    res.set_header("Access-Control-Allow-Credentials", "true");
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE");
    res.set_header("Access-Control-Allow-Headers", "*");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Access-Control-Allow-Origin", req.has_header("Origin") ? req.get_header_value("Origin") : "*");
  });
}

void HttpServer::add_routes() {
  httplib::Server& s = *http_;
  // No lock: it answers at once whatever the requests do.
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    switch (state_.load()) {
      case State::kLoading: return send_error(res, 503, "unavailable_error", "", "", "the model is loading");
      case State::kStopping: return send_shutting_down(res, "the server is shutting down");
      case State::kReady: return send_json(res, 200, {{"status", "ok"}});
    }
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      send_json(res, 200, {{"object", "list"}, {"data", json::array({model_json(model_name_, model_->config())})}});
    });
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const std::string id = req.matches[1];
      if (id != model_name_) {
        throw ApiError(404, "invalid_request_error", "model", "model_not_found",
                       fmt::format("the model '{}' does not exist (this server serves '{}')", id, model_name_));
      }
      send_json(res, 200, model_json(model_name_, model_->config()));
    });
  });
  s.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] { send_json(res, 200, props()); });
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] { res.set_content(metrics_.render(scheduler_->stats()), "text/plain; version=0.0.4"); });
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_tokenize(req, res); });
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_detokenize(req, res); });
  });
  add_context_routes();
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_completion(req, res, false); });
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_completion(req, res, true); });
  });
}

// Compressed contexts (docs/serving.md): made, listed, described and deleted by id.
void HttpServer::add_context_routes() {
  httplib::Server& s = *http_;
  s.Post("/v1/contexts", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_create_context(req, res); });
  });
  s.Get("/v1/contexts", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      json data = json::array();
      for (const ResidentContext& c : scheduler_->contexts()) {
        data.push_back(context_json(c.id, c.context.get(), c.running, model_name_));
      }
      send_json(res, 200, {{"object", "list"}, {"data", data}});
    });
  });
  s.Get(R"(/v1/contexts/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const std::string id = req.matches[1];
      const std::optional<ResidentContext> c = scheduler_->describe_context(id);
      if (!c) context_not_found(id);
      send_json(res, 200, context_json(c->id, c->context.get(), c->running, model_name_));
    });
  });
  s.Delete(R"(/v1/contexts/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const std::string id = req.matches[1];
      if (!scheduler_->remove_context(id)) context_not_found(id);
      send_json(res, 200, {{"id", id}, {"object", "kv_context.deleted"}, {"deleted", true}});
    });
  });
}

void HttpServer::start() {
  listen();
  load_model();
}

void HttpServer::listen() {
  port_ = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                             : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ < 0) fail("cannot listen on {}:{}", options_.host, options_.port);
  // httplib 0.11 (as Debian builds it) listens with a backlog of 5. Clients that connect at
  // once (a load generator's 32) overflow it; the kernel then answers with SYN cookies and
  // resets the connections whose cookie fails, so requests die unanswered. Listening again
  // on the bound socket sets the kernel's backlog to the system maximum instead.
  int listening = 0;
  socklen_t size = sizeof listening;
  if (getsockopt(listen_socket_, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || listening == 0 ||
      ::listen(listen_socket_, SOMAXCONN) != 0) {
    spdlog::warn("could not raise the listen backlog; bursts of new connections may be refused");
  }
  listener_ = std::thread([this] {
    http_->listen_after_bind();
    listener_done_ = true;
  });
}

void HttpServer::load_model() {
  model_ = Model::load(options_.model_path);
  try {
    chat_template_ = ChatTemplate::detect(model_->tokenizer(), options_.chat_template);
  } catch (const Error& e) {
    if (!options_.chat_template.empty()) throw;
    // As llama-server: a model without a chat format it knows still chats, in ChatML.
    chat_template_ = ChatTemplate::detect(model_->tokenizer(), kFallbackChatTemplate);
    chat_template_fallback_ = true;
    spdlog::warn("{}; chat requests use {} (--chat-template NAME picks another)", e.what(), kFallbackChatTemplate);
  }
  scheduler_ = make_scheduler_(model_, options_);
  n_ctx_ = scheduler_->n_ctx();
  State loading = State::kLoading;
  state_.compare_exchange_strong(loading, State::kReady);  // not if stop() came first
}

void HttpServer::stop() {
  state_ = State::kStopping;  // new requests get 503
  if (scheduler_) {
    scheduler_->cancel_all();  // running and waiting requests end as kShutdown
    // Their handlers write the errors; httplib stops calling a stream's provider once it
    // stops listening, so it may stop only after.
    std::unique_lock lock(completions_mutex_);
    if (!completions_done_.wait_for(lock, kShutdownWriteGrace, [&] { return completions_ == 0; })) {
      spdlog::warn("{} answers still being written at shutdown", completions_);
    }
  }
  stop_listener();
  scheduler_.reset();  // joins the engine's thread
}

void HttpServer::stop_listener() {
  if (!listener_.joinable()) return;
  // httplib's stop() does nothing until listen_after_bind() has begun (is_running()), a
  // thread start after listen(): stopped before that (a model that fails to load at once),
  // the listener would then run forever and the join below never return.
  while (!listener_done_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!listener_done_) http_->stop();
  listener_.join();
}

std::shared_ptr<void> HttpServer::track_completion() {
  {
    std::lock_guard lock(completions_mutex_);
    ++completions_;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) {
    std::lock_guard lock(completions_mutex_);
    if (--completions_ == 0) completions_done_.notify_all();
  });
}

json HttpServer::props() const {
  const CompletionDefaults& d = options_.defaults;
  return {{"model_path", options_.model_path},
          {"total_slots", options_.n_slots},
          {"n_ctx", n_ctx_},
          {"kv_memory_bytes", options_.kv_memory_bytes},
          {"max_queue", queue_limit(options_)},
          {"chat_template", chat_template_ ? chat_template_->name() : ""},
          {"chat_template_fallback", chat_template_fallback_},
          {"default_generation_settings",
           {{"max_tokens", d.max_tokens}, {"kv_press", d.press}, {"kv_budget", d.kv_budget}, {"kv_ratio", d.kv_ratio}}}};
}

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize_request(parse_json_body(req.body));
  const Tokenizer& tok = model_->tokenizer();
  const std::vector<int32_t> ids = tok.encode(r.content, r.add_special, true);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (r.with_pieces) {
      tokens.push_back({{"id", id}, {"piece", tok.token_piece(id)}});
    } else {
      tokens.push_back(id);
    }
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const Tokenizer& tok = model_->tokenizer();
  const std::vector<int32_t> ids = parse_detokenize_request(parse_json_body(req.body), tok.n_vocab());
  send_json(res, 200, {{"content", tok.decode(ids)}});
}

// The batch engine's request that makes a context: the body's prompt or messages (the
// same parser as a completion's), compressed question-agnostically by its press, nothing
// generated. A press that evicts after the prefill is refused: what it keeps would depend
// on the question; deferkv, which resumes, makes a deferred context (each completion from it
// evicts at its own step d).
GenerationRequest HttpServer::context_request(const json& body, bool chat) const {
  const CompletionRequest r = parse_completion_request(body, chat, options_.defaults);
  GenerationRequest g;
  g.kind = SequenceKind::kCompressContext;
  g.prompt = context_tokens(r, model_->tokenizer(), *chat_template_, n_ctx_);
  g.context_id = context_id();
  g.max_tokens = 0;
  set_press(r, g);
  if (g.press && press_evicts_after_prefill(g.press->describe()) && !press_resumes_deferred(g.press->describe())) {
    bad_request("kv_press", fmt::format("press '{}' evicts after the prefill (at a decode step or while decoding), "
                                        "so what it keeps depends on the question: a context shared by many "
                                        "questions needs a press that evicts once at the prompt's end, or deferkv "
                                        "(a deferred context: each question evicts at its own step d)",
                                        g.press->describe()));
  }
  return g;
}

void HttpServer::handle_create_context(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  // The body is a completion's prompt or messages with the press and budget fields, read by
  // the same parser; a chat context is the messages without the assistant's turn opened.
  const bool chat = body.is_object() && body.contains("messages");
  if (chat && body.contains("prompt")) bad_request("prompt", "give 'prompt' or 'messages', not both");
  if (body.is_object() && body.contains("kv_context")) {
    bad_request("kv_context", "a context is made from a prompt or messages, not from another context");
  }
  GenerationRequest g = context_request(body, chat);
  const std::string made_id = g.context_id;
  // The outcome, handed from the scheduler's thread to this one.
  struct Made {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<GenerationOutcome> outcome;
  };
  auto made = std::make_shared<Made>();
  GenerationCallbacks callbacks;
  callbacks.on_finish = [made](const GenerationOutcome& o) {
    std::lock_guard lock(made->mutex);
    made->outcome = o;
    made->done.notify_all();
  };
  std::shared_ptr<void> answering = track_completion();  // stop() waits for its answer
  RequestId id = 0;
  try {
    id = scheduler_->submit(std::move(g), std::move(callbacks));
  } catch (const SubmitError& e) {
    if (e.refusal == SubmitRefusal::kKvMemoryExceeded) bad_request(chat ? "messages" : "prompt", e.what(), "kv_memory_exceeded");
    refuse(e);
  }
  ClientConnection client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  std::unique_lock lock(made->mutex);
  bool cancelled = false;
  while (!made->done.wait_for(lock, kClientCheckPeriod, [&] { return made->outcome.has_value(); })) {
    if (!cancelled && client.closed()) {
      scheduler_->cancel(id);  // its context, if made meanwhile, stays: the client can list it
      cancelled = true;
    }
  }
  const GenerationOutcome outcome = *made->outcome;
  lock.unlock();
  if (outcome.end != GenerationEnd::kFinished || !outcome.context) return send_unfinished(res, outcome);
  send_json(res, 200, context_json(made_id, outcome.context.get(), 0, model_name_));
}

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const CompletionRequest r = parse_completion_request(parse_json_body(req.body), chat, options_.defaults);
  std::shared_ptr<const CompressedContext> context;
  if (!r.kv_context.empty()) {
    context = scheduler_->find_context(r.kv_context);
    if (!context) context_not_found(r.kv_context);
  }
  CompletionPlan plan = plan_completion(r, model_->tokenizer(), *chat_template_, n_ctx_, context);
  if (!context && options_.context_reuse) {
    // Each prompt that begins with a kept context's tokens, compressed by the press this
    // request asks for, reads only the rest after that context. [OUR FORMULATION] The press
    // then sees the document alone (question-agnostic, as the context was made), not the
    // whole prompt: the answer is that of kv_context, which is why reuse is opt-in.
    for (GenerationRequest& g : plan.generations) {
      const std::optional<ResidentContext> found =
          scheduler_->find_context_prefix(g.prompt, g.press ? g.press->describe() : "full", g.budget);
      if (!found) continue;
      g.prompt.erase(g.prompt.begin(), g.prompt.begin() + static_cast<int64_t>(found->context->tokens().size()));
      g.press.reset();
      g.budget = KvBudget();
      g.context = found->context;
      g.context_id = found->id;
    }
  }
  auto reply = std::make_shared<CompletionReply>(CompletionReply{
      .scheduler = scheduler_.get(),
      .tok = &model_->tokenizer(),
      .chat = chat,
      .logprobs = r.logprobs,
      .head = {{"id", completion_id(chat)},
               {"object", chat ? (r.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
               {"created", unix_time()},
               {"model", model_name_}},
      .press = context ? json{{"kv_press", context->press()}, {"kv_budget", nullptr}, {"kv_ratio", nullptr},
                              {"kv_context", r.kv_context}}
                       : press_json(r),
      .client = ClientConnection(req.local_addr, req.local_port, req.remote_addr, req.remote_port),
  });
  if (r.kv_context_extend) {
    reply->extended_context = context_id();
    plan.generations.at(0).extend_context_id = reply->extended_context;
  }
  std::shared_ptr<void> answering = track_completion();  // until the answer is written
  submit_choices(*reply, std::move(plan), r.stop, metrics_);
  if (r.stream) return reply_streamed(reply, std::move(answering), res);
  reply_blocking(*reply, res);
}

}  // namespace deferkv::server
