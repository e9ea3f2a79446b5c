#pragma once
// `deferkv serve`: an OpenAI-compatible HTTP server over a Scheduler. It listens first and
// loads the model after (GET /health answers 503 until the model is ready), routes
//   POST /v1/completions, /v1/chat/completions   (stream: true → server-sent events)
//   GET /v1/models, /v1/models/{id}, /health, /props, /metrics   POST /tokenize, /detokenize
//   POST, GET /v1/contexts   GET, DELETE /v1/contexts/{id}   (compressed contexts)
//   OPTIONS on any path (CORS preflight)
// and turns every deferkv::Error into OpenAI's JSON error shape with a 4xx status; a
// failure inside one generation fails that request only. stop() (shutdown) answers every
// request that has not finished with an error, 503 server_shutting_down, never as a
// normal end (docs/serving.md, "Shutdown").
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "deferkv/chat_template.h"
#include "deferkv/model.h"
#include "server/completion_request.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace deferkv::server {

// The chat format of a model that carries none deferkv knows (and no --chat-template).
inline constexpr const char* kFallbackChatTemplate = "chatml";

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see port())
  int n_slots = 1;
  int64_t kv_memory_bytes = int64_t{2} << 30;
  int threads = 1;
  int64_t n_ctx = 0;  // 0: the model's, at most 4096
  std::string chat_template;  // "" : the model's own
  CompletionDefaults defaults;
  size_t max_body_bytes = 1 << 20;
  // Requests waiting for a slot at most; one more is refused (429) rather than queued
  // without end. 0: kDefaultQueuePerSlot per slot, at least kMinDefaultQueue.
  int64_t max_queue = 0;
  // Where compressed contexts are written, spilled and found again after a restart ("" none).
  std::string context_dir;
  // --context-reuse: a completion without kv_context whose prompt tokens begin with a kept
  // context's, under the same press, starts from the longest such context (docs/serving.md).
  bool context_reuse = false;
};

inline constexpr int64_t kDefaultQueuePerSlot = 8;
inline constexpr int64_t kMinDefaultQueue = 64;
// The queue limit the options ask for (max_queue, or the default for their slots).
int64_t queue_limit(const ServerOptions& options);

// Makes the scheduler once the model is loaded. The server's own is make_batch_scheduler;
// tests pass one that makes a fake.
using SchedulerFactory =
    std::function<std::unique_ptr<Scheduler>(std::shared_ptr<const Model> model, const ServerOptions& options)>;
// A BatchScheduler with the options' slots, KV memory, context, threads and queue limit.
std::unique_ptr<Scheduler> make_batch_scheduler(std::shared_ptr<const Model> model, const ServerOptions& options);

class HttpServer {
 public:
  explicit HttpServer(const ServerOptions& options, SchedulerFactory make_scheduler = make_batch_scheduler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // listen(), then load_model().
  void start();
  // Binds and starts answering: 503 ("the model is loading") until load_model() is done.
  // Error when the address cannot be bound.
  void listen();
  // Loads the model and starts the scheduler; requests are served from then on. Errors
  // (a file that is missing or not a model) propagate; stop() (or the destructor) then
  // ends the listener promptly, whatever clients do meanwhile.
  void load_model();
  int port() const { return port_; }
  // Refuses new requests (503), cancels running and waiting ones, waits for their error
  // answers to be written, stops listening; returns when all are done. Idempotent.
  void stop();

 private:
  enum class State { kLoading, kReady, kStopping };

  // Body limit, connection threads, httplib's errors in OpenAI's shape, CORS.
  void add_connection_handling();
  void add_routes();
  void add_context_routes();
  GenerationRequest context_request(const nlohmann::json& body, bool chat) const;
  // Stops httplib's listener and joins its thread, also when it has not begun to listen yet.
  void stop_listener();
  // Counts a completion whose answer is being written until the returned token is released.
  std::shared_ptr<void> track_completion();
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_create_context(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  nlohmann::json props() const;
  // Runs a handler, turning its errors into JSON error responses.
  template <typename Handler>
  void guarded(httplib::Response& res, Handler&& handler);

  ServerOptions options_;
  SchedulerFactory make_scheduler_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
  int port_ = 0;
  int listen_socket_ = -1;  // as httplib's socket hook last saw it; see listen()
  std::atomic<State> state_{State::kLoading};
  // Completions whose answers are not yet written; stop() waits for them (their errors).
  std::mutex completions_mutex_;
  std::condition_variable completions_done_;
  int64_t completions_ = 0;
  std::shared_ptr<const Model> model_;
  std::string model_name_;
  std::optional<ChatTemplate> chat_template_;
  bool chat_template_fallback_ = false;  // the model has none deferkv knows: ChatML
  std::unique_ptr<Scheduler> scheduler_;
  int64_t n_ctx_ = 0;
  ServerMetrics metrics_;
};

}  // namespace deferkv::server
