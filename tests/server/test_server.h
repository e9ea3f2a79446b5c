#pragma once
// A deferkv server for one test: on 127.0.0.1, on a free port, on the embedded
// stories260K; stopped when the test ends. Clients are cpp-httplib's.
#include <memory>
#include <chrono>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "client/prometheus_text.h"
#include "server/http_server.h"

namespace deferkv::testing {

inline std::string stories_model_path() { return std::string(DEFERKV_SOURCE_DIR) + "/models/stories260K.gguf"; }

inline server::ServerOptions test_server_options() {
  server::ServerOptions o;
  o.model_path = stories_model_path();
  o.host = "127.0.0.1";
  o.port = 0;
  o.threads = 2;
  o.chat_template = "chatml";  // stories260K carries none
  o.kv_memory_bytes = int64_t{256} << 20;
  return o;
}

class TestServer {
 public:
  explicit TestServer(const server::ServerOptions& options = test_server_options(), bool load = true,
                      server::SchedulerFactory make_scheduler = server::make_batch_scheduler)
      : server_(options, std::move(make_scheduler)) {
    server_.listen();
    if (load) server_.load_model();
  }
  ~TestServer() { server_.stop(); }
  server::HttpServer& server() { return server_; }

  // A new client (each thread of a test takes its own).
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
    c->set_read_timeout(60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const nlohmann::json& body) const {
    return client()->Post(path.c_str(), body.dump(), "application/json");
  }
  httplib::Result get(const std::string& path) const { return client()->Get(path.c_str()); }

 private:
  server::HttpServer server_;
};

// The value of an unlabelled metric in Prometheus text ("name value" line); -1 if absent.
inline double metric_value(const std::string& text, const std::string& name) {
  return client::metric_value(text, name).value_or(-1);
}

// /metrics once `requests` requests have finished (cancelled ones included), read every
// 50 ms for at most 10 s (then as it is, for the test to show).
inline std::string metrics_once_finished(const TestServer& t, int64_t requests) {
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    metrics = t.get("/metrics")->body;
    if (metric_value(metrics, "deferkv_requests_total") == static_cast<double>(requests)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return metrics;
}

// A POST of `body` to /v1/completions as httplib::Request, for tests that read the stream
// themselves (set its content_receiver).
inline httplib::Request completion_post(const nlohmann::json& body) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  return req;
}

}  // namespace deferkv::testing
