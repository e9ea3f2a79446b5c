// The server's life around its requests, in process on 127.0.0.1: a model that cannot
// load ends the server promptly (an error, exit 1) while clients poll /health; /health and
// /metrics answer at once while every slot generates and the queue holds four times as
// many; shutdown answers every unfinished request with an error (503 or an error event),
// never as a normal end; a client that leaves a non-streamed request cancels it.
// Bounded: each test's requests end when its server stops.
// Mutants tried: stop() without waiting for the listener to begin hangs the first two tests
// (caught by their 20 s bounds); httplib's fixed pool (two threads a slot plus eight) fails
// the health test; a shutdown that ends requests as finished fails the shutdown test (200,
// "length"); without the client check the leaving client's request generated all 3000 tokens.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <thread>

#include "client/sse_events.h"
#include "deferkv/compressed_context.h"
#include "deferkv/model.h"
#include "server/test_server.h"
#include "support/read_file.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string retrieval_model() { return std::string(DEFERKV_SOURCE_DIR) + "/models/deferkv-retrieval-5m.gguf"; }

// Long requests (ignore_eos, thousands of tokens) on the retrieval model: they run until
// the test stops the server.
server::ServerOptions long_request_options(int slots) {
  server::ServerOptions o = test_server_options();
  o.model_path = retrieval_model();
  o.n_slots = slots;
  o.threads = 1;
  return o;
}

json long_request(bool stream) {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 3000}, {"ignore_eos", true}, {"temperature", 0},
          {"stream", stream}};
}

// The first 160 bytes of the stories model: a GGUF cut inside its metadata.
std::string truncated_model(const gguf_test::TempDir& dir) {
  const std::string path = dir.file("truncated.gguf");
  const std::string bytes = read_file(stories_model_path());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, 160);
  return path;
}

// Clients that GET /health in a loop on `port` until destroyed.
class HealthPollers {
 public:
  HealthPollers(int port, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, port] {
        httplib::Client c("127.0.0.1", port);
        c.set_connection_timeout(0, 200000);
        c.set_read_timeout(1, 0);
        while (!stop_) {
          if (c.Get("/health")) ++answers_;
        }
      });
    }
  }
  ~HealthPollers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  int answers() const { return answers_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> answers_{0};
  std::vector<std::thread> threads_;
};

// A model that fails to load, at once (a missing file) or while it is read (a truncated
// one), with clients polling /health: load_model() throws and stopping the server returns
// promptly. It hung when the listener thread had not begun to listen yet (httplib's stop()
// did nothing then); repeated, as that depends on timing.
TEST(ServerLifecycle, AModelThatCannotLoadStopsTheServerPromptlyWhileClientsPoll) {
  const gguf_test::TempDir dir;
  for (const std::string& path : {std::string("/nonexistent/model.gguf"), truncated_model(dir)}) {
    for (int i = 0; i < 20; ++i) {
      server::ServerOptions o = test_server_options();
      o.model_path = path;
      auto done = std::async(std::launch::async, [&] {
        server::HttpServer s(o);
        s.listen();
        HealthPollers pollers(s.port(), i % 2 == 0 ? 0 : 4);
        EXPECT_THROW(s.load_model(), Error) << path;
        s.stop();
      });
      if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        ADD_FAILURE() << "the server did not stop after failing to load " << path;
        std::_Exit(1);  // its thread cannot be joined
      }
      done.get();
    }
  }
}

// `deferkv serve` itself: the error names the file and the exit status is 1, within a bound,
// with clients polling /health from the moment it listens.
TEST(ServerLifecycle, ServeExitsOneNamingTheFileItCannotLoad) {
  const gguf_test::TempDir dir;
  for (const std::string& path : {dir.file("missing.gguf"), truncated_model(dir)}) {
    const std::string log = dir.file("serve.log");
    // posix_spawn, not fork: the test program has threads (and may run under TSan).
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const std::vector<std::string> args = {DEFERKV_CLI, "serve", "-m", path, "--port", "0", "-t", "1"};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, DEFERKV_CLI, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(spawned, 0);
    const auto start = Clock::now();
    std::unique_ptr<HealthPollers> pollers;
    int status = 0;
    bool exited = false;
    while (!exited && seconds_since(start) < 20) {
      exited = waitpid(pid, &status, WNOHANG) == pid;
      std::smatch port;
      const std::string text = read_file(log);
      if (!pollers && std::regex_search(text, port, std::regex("listening on http://127.0.0.1:([0-9]+)"))) {
        pollers = std::make_unique<HealthPollers>(std::stoi(port[1]), 4);
      }
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pollers.reset();
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    const std::string text = read_file(log);
    EXPECT_TRUE(exited) << "still running after 20 s: " << text;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ": " << text;
    EXPECT_NE(text.find("error: "), std::string::npos) << text;
    EXPECT_NE(text.find(path), std::string::npos) << text;
  }
}

// Streamed requests that run in background threads, each reading its events to the end.
class Streams {
 public:
  Streams(const TestServer& t, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([&t, this] {
        auto c = t.client();
        httplib::Request req = completion_post(long_request(true));
        req.content_receiver = [this](const char*, size_t, uint64_t, uint64_t) {
          ++chunks_;
          return true;
        };
        c->send(req);
      });
    }
  }
  ~Streams() { join(); }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int chunks() const { return chunks_; }

 private:
  std::atomic<int> chunks_{0};
  std::vector<std::thread> threads_;
};

struct Percentiles {
  double p50, p90, p99, max;
};
Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.9), at(0.99), v.back()};
}

// Every slot generating and the queue holding four times as many streams: /health and
// /metrics answer within 100 ms. They used to wait in httplib's fixed pool (two threads a
// slot plus eight) behind the streams, for seconds (with that pool this test does not even
// see the 16 waiting: its own /metrics polls queue behind the streams).
TEST(ServerLifecycle, HealthAndMetricsAnswerAtOnceWhileEverySlotIsBusyAndTheQueueIsFull) {
  constexpr int kSlots = 4;
  TestServer t(long_request_options(kSlots));
  Streams streams(t, kSlots * 5);
  // The streams end when the server stops: stop it before they are joined, however the test ends.
  struct StopFirst {
    TestServer& t;
    ~StopFirst() { t.server().stop(); }
  } stop_first{t};
  // Wait (bounded) for the load: every slot running, 16 waiting.
  std::string metrics;
  for (int i = 0; i < 500; ++i) {
    metrics = t.get("/metrics")->body;
    if (metric_value(metrics, "deferkv_requests_running") == kSlots &&
        metric_value(metrics, "deferkv_requests_waiting") == 4 * kSlots) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(metric_value(metrics, "deferkv_requests_waiting"), 4 * kSlots) << metrics;
  std::vector<double> health, scrape;
  for (int i = 0; i < 40; ++i) {
    auto start = Clock::now();
    auto h = t.get("/health");
    health.push_back(seconds_since(start));
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    start = Clock::now();
    auto m = t.get("/metrics");
    scrape.push_back(seconds_since(start));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    // Still under the full load while probed.
    EXPECT_EQ(metric_value(m->body, "deferkv_requests_running"), kSlots);
    EXPECT_EQ(metric_value(m->body, "deferkv_requests_waiting"), 4 * kSlots);
  }
  const Percentiles h = percentiles(health), m = percentiles(scrape);
  std::printf("/health  ms: p50 %.2f p90 %.2f p99 %.2f max %.2f\n", h.p50 * 1e3, h.p90 * 1e3, h.p99 * 1e3, h.max * 1e3);
  std::printf("/metrics ms: p50 %.2f p90 %.2f p99 %.2f max %.2f\n", m.p50 * 1e3, m.p90 * 1e3, m.p99 * 1e3, m.max * 1e3);
  // Within 100 ms (0.1-0.3 ms at p90 on a 2-core machine shared with builds); the max may
  // meet a busy CI machine's scheduling (15 ms seen), so it is held to 1 s, still far below
  // the seconds a probe waited behind the streams.
  EXPECT_LT(h.p90, 0.1);
  EXPECT_LT(m.p90, 0.1);
  EXPECT_LT(h.max, 1.0);
  EXPECT_LT(m.max, 1.0);
}

// The events of a streamed body: each "data: " payload, [DONE] included.
std::vector<std::string> payloads(const std::string& body) {
  client::SseReader reader;
  return reader.feed(body);
}

// Shutdown: a request that had not started gets 503 server_shutting_down, streamed or not;
// a running non-streamed one gets 503 too; a running stream ends with an error event in
// OpenAI's shape, then [DONE]. No answer carries a finish reason.
TEST(ServerLifecycle, ShutdownAnswersEveryUnfinishedRequestWithAnError) {
  auto t = std::make_unique<TestServer>(long_request_options(2));
  std::promise<void> stream_began;
  std::atomic<bool> told{false};
  // Submitted in order, so that the first two run and the last two wait.
  struct Answer {
    int status = 0;
    std::string body;
  };
  std::vector<Answer> answers(4);
  std::vector<std::thread> clients;
  const std::vector<bool> streamed = {false, true, false, true};
  for (size_t i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      auto c = t->client();
      httplib::Request req = completion_post(long_request(streamed[i]));
      req.response_handler = [&](const httplib::Response& r) {
        answers[i].status = r.status;
        return true;
      };
      req.content_receiver = [&, i](const char* data, size_t size, uint64_t, uint64_t) {
        answers[i].body.append(data, size);
        if (i == 1 && !told.exchange(true)) stream_began.set_value();
        return true;
      };
      c->send(req);
    });
    // Each waits for the one before it to be counted (running, then waiting).
    for (int k = 0; k < 500; ++k) {
      const std::string m = t->get("/metrics")->body;
      if (metric_value(m, "deferkv_requests_running") + metric_value(m, "deferkv_requests_waiting") ==
          static_cast<double>(i + 1)) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ASSERT_EQ(stream_began.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const std::string before = t->get("/metrics")->body;
  ASSERT_EQ(metric_value(before, "deferkv_requests_running"), 2) << before;
  ASSERT_EQ(metric_value(before, "deferkv_requests_waiting"), 2) << before;
  t->server().stop();  // as SIGTERM does
  for (auto& c : clients) c.join();

  for (size_t i : {0, 2, 3}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(answers[i].status, 503) << answers[i].body;
    const json e = json::parse(answers[i].body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << answers[i].body;
    EXPECT_EQ(e["error"]["code"], "server_shutting_down");
    EXPECT_EQ(e["error"]["type"], "unavailable_error");
    EXPECT_EQ(e["error"]["message"].get<std::string>().find("the server is shutting down"), 0u);
  }
  EXPECT_NE(json::parse(answers[0].body)["error"]["message"].get<std::string>().find("stopped after"), std::string::npos);
  EXPECT_NE(json::parse(answers[2].body)["error"]["message"].get<std::string>().find("had not started"), std::string::npos);
  // The running stream: text chunks, then the error event, then [DONE].
  EXPECT_EQ(answers[1].status, 200);
  const std::vector<std::string> events = payloads(answers[1].body);
  ASSERT_GE(events.size(), 3u) << answers[1].body;
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  ASSERT_TRUE(last.contains("error")) << last.dump();
  EXPECT_EQ(last["error"]["code"], "server_shutting_down");
  for (size_t k = 0; k + 2 < events.size(); ++k) {
    const json chunk = json::parse(events[k]);
    ASSERT_TRUE(chunk.contains("choices")) << events[k];
    EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null()) << events[k];
  }
  // Stopped: nothing more is accepted.
  EXPECT_FALSE(t->get("/health"));
}

// A client that sends a non-streamed request and leaves (curl -m 2): the server notices
// the closed connection and cancels the request long before its max_tokens.
TEST(ServerLifecycle, AClientThatLeavesANonStreamedRequestCancelsIt) {
  TestServer t(long_request_options(1));
  const std::string body = long_request(false).dump();
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(t.server().port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  // Gone once the request runs.
  for (int i = 0; i < 500; ++i) {
    if (metric_value(t.get("/metrics")->body, "deferkv_requests_running") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fd);
  const std::string metrics = metrics_once_finished(t, 1);
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_total"), 1) << metrics;
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_running"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_used"), 0);
  EXPECT_LT(metric_value(metrics, "deferkv_generated_tokens_total"), 1500) << metrics;
}


// `deferkv serve` as its own process, which the test kills with SIGKILL.
class ServeProcess {
 public:
  ServeProcess(const std::vector<std::string>& extra, const std::string& log) {
    std::vector<std::string> args = {DEFERKV_CLI, "serve", "-m", stories_model_path(), "--port", "0", "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int spawned = posix_spawn(&pid_, DEFERKV_CLI, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) pid_ = -1;
    // Its port from its log, then /health 200 once the model is in: 30 s at most.
    const auto start = Clock::now();
    while (pid_ > 0 && port_ == 0 && seconds_since(start) < 30) {
      std::smatch m;
      const std::string text = read_file(log);
      if (std::regex_search(text, m, std::regex("listening on http://127.0.0.1:([0-9]+)"))) port_ = std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    while (port_ != 0 && seconds_since(start) < 30) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/health"); r && r->status == 200) {
        ready_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~ServeProcess() { kill_now(); }
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  bool ready() const { return ready_; }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30, 0);
    return c;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool ready_ = false;
};

// A server with --context-dir killed with SIGKILL while it answers from a context (a stream
// mid-decode, another context being made and written beside it), started again on the same
// directory: it answers the same greedy text from the same context id, and every context file
// in the directory loads (none is corrupt: save() writes a temporary file, then renames it).
// Mutants: a store that forgets the directory's contexts at its start fails (404, listing);
// a save() straight into its file (not atomic) passed four runs: a kill rarely lands inside
// a write of a few kilobytes, so this test bounds the behaviour, the atomic write is what
// the file format's own tests (truncated, corrupt files refused) rely on.
TEST(ServerLifecycle, AContextDirSurvivesSigkillWhileAnswering) {
  const gguf_test::TempDir dir;
  const std::string contexts = dir.file("contexts");
  const json question = {{"prompt", " What did the dog do?"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  const json document = {{"prompt", "Lily had a red ball. She played with it in the park every day. One day a big brown "
                                    "dog came to the park. The dog wagged its long tail and ran after the ball. Lily "
                                    "laughed and threw the ball again, and they played until the sun went down."},
                         {"kv_press", "snapkv"},
                         {"kv_budget", 40}};
  std::string id, before;
  {
    ServeProcess serve({"--context-dir", contexts}, dir.file("serve1.log"));
    ASSERT_TRUE(serve.ready()) << read_file(dir.file("serve1.log"));
    auto c = serve.client();
    const auto made = c->Post("/v1/contexts", document.dump(), "application/json");
    ASSERT_TRUE(made && made->status == 200) << (made ? made->body : "no response");
    id = json::parse(made->body)["id"];
    json ask = question;
    ask["kv_context"] = id;
    const auto answered = c->Post("/v1/completions", ask.dump(), "application/json");
    ASSERT_TRUE(answered && answered->status == 200) << (answered ? answered->body : "no response");
    before = json::parse(answered->body)["choices"][0]["text"];

    // A long stream from the context and contexts being made, until the kill ends them.
    std::atomic<int> chunks{0};
    std::thread streaming([&] {
      auto sc = serve.client();
      json body = {{"kv_context", id}, {"prompt", " And then"}, {"max_tokens", 400}, {"ignore_eos", true},
                   {"temperature", 0}, {"stream", true}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.set_header("Content-Type", "application/json");
      req.body = body.dump();
      req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
        ++chunks;
        return true;
      };
      sc->send(req);
    });
    std::atomic<bool> stop{false};
    std::thread making([&] {
      auto mc = serve.client();
      while (!stop) {
        if (!mc->Post("/v1/contexts", document.dump(), "application/json")) break;
      }
    });
    const auto start = Clock::now();
    while (chunks < 3 && seconds_since(start) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GE(chunks, 3) << "the stream did not start";
    serve.kill_now();
    stop = true;
    streaming.join();
    making.join();
  }
  // Every context file there loads, checked against the model.
  const std::shared_ptr<const Model> model = Model::load(stories_model_path());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(contexts)) {
    if (e.path().extension() != ".dkvctx") continue;
    ++files;
    EXPECT_NO_THROW(CompressedContext::load(e.path().string(), *model)) << e.path();
  }
  EXPECT_GE(files, 1);
  ServeProcess again({"--context-dir", contexts}, dir.file("serve2.log"));
  ASSERT_TRUE(again.ready()) << read_file(dir.file("serve2.log"));
  auto c = again.client();
  const auto listed = c->Get("/v1/contexts");
  ASSERT_TRUE(listed && listed->status == 200);
  EXPECT_EQ(json::parse(listed->body)["data"].size(), static_cast<size_t>(files));
  json ask = question;
  ask["kv_context"] = id;
  const auto answered = c->Post("/v1/completions", ask.dump(), "application/json");
  ASSERT_TRUE(answered && answered->status == 200) << (answered ? answered->body : "no response");
  EXPECT_EQ(json::parse(answered->body)["choices"][0]["text"], before);
  for (const auto& e : std::filesystem::directory_iterator(contexts)) {
    EXPECT_EQ(e.path().extension(), ".dkvctx") << "a save cut short is cleared at the start: " << e.path();
  }
}

}  // namespace
}  // namespace deferkv::testing
