// The server's request path with its scheduler faked (fake_scheduler.h): what a request
// becomes (the GenerationRequest submitted), the blocking and streamed replies built from
// the scheduler's callbacks, and each refusal of submit() answered with its own status and
// OpenAI error code: 503 shutting down, 429 queue full, 400 KV memory, 500 only for a bug.
// Then the queue limit end to end, on the real scheduler (--max-queue).
// Mutants tried: a refusal mapped by its message (or every refusal as the old 400
// kv_memory_exceeded) fails EachSubmitRefusal...; a submit error other than SubmitError
// answered as 400 fails AnyOtherSubmitFailureIs500; not cancelling the choices queued
// before a refused one fails ARefusedPromptInAList...
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/sse_events.h"
#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "server/fake_scheduler.h"
#include "server/test_server.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;
using server::GenerationEnd;
using server::GenerationOutcome;
using server::SubmitError;
using server::SubmitRefusal;

struct FakeServer {
  std::shared_ptr<FakeScheduler::State> state = std::make_shared<FakeScheduler::State>();
  TestServer server{test_server_options(), true, FakeScheduler::factory(state)};
  std::shared_ptr<const Model> model = Model::load(stories_model_path());

  // POSTs on a thread of its own, as the answer waits for the test to drive the fake.
  std::future<httplib::Result> post_async(const std::string& path, const json& body) {
    return std::async(std::launch::async, [this, path, body] { return server.post(path, body); });
  }
};

std::vector<std::string> payloads(const std::string& body) {
  client::SseReader reader;
  return reader.feed(body);
}

struct Expected {
  SubmitRefusal refusal;
  int status;
  const char* type;
  const char* code;
  const char* param;  // "" : null
};

TEST(ServerRequestPath, EachSubmitRefusalHasItsOwnStatusAndCode) {
  // Before the server: its handler threads read the cases (the fake's on_submit), and the
  // server's end (joining them) must come before the cases' (ThreadSanitizer saw the
  // vector freed while a handler thread's read was unordered with it).
  const std::vector<Expected> cases = {
      {SubmitRefusal::kShuttingDown, 503, "unavailable_error", "server_shutting_down", ""},
      {SubmitRefusal::kQueueFull, 429, "requests", "rate_limit_exceeded", ""},
      {SubmitRefusal::kKvMemoryExceeded, 400, "invalid_request_error", "kv_memory_exceeded", "max_tokens"},
  };
  FakeServer f;
  for (const Expected& e : cases) {
    for (bool stream : {false, true}) {
      SCOPED_TRACE(::testing::Message() << e.status << (stream ? " streamed" : ""));
      {
        std::lock_guard lock(f.state->mutex);
        f.state->on_submit = [&](const server::GenerationRequest&, size_t) {
          throw SubmitError(e.refusal, "refused by the fake");
        };
      }
      const auto r = f.server.post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"stream", stream}});
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, e.status) << r->body;
      const json err = json::parse(r->body)["error"];
      EXPECT_EQ(err["type"], e.type);
      EXPECT_EQ(err["code"], e.code);
      EXPECT_EQ(err["param"], *e.param ? json(e.param) : json());
    }
  }
  std::lock_guard lock(f.state->mutex);
  EXPECT_TRUE(f.state->submitted.empty());
}

// A scheduler that throws anything but a SubmitError breaks its contract: a bug, 500, never
// a 400 that blames the request.
TEST(ServerRequestPath, AnyOtherSubmitFailureIs500) {
  FakeServer f;
  {
    std::lock_guard lock(f.state->mutex);  // the handler threads read it under the lock
    f.state->on_submit = [](const server::GenerationRequest&, size_t) { throw Error("the fake's bug"); };
  }
  const auto r = f.server.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "server_error");
}

// A list of prompts whose second is refused: the first, already queued, is cancelled, and
// the response is the refusal's.
TEST(ServerRequestPath, ARefusedPromptInAListCancelsThoseQueuedBeforeIt) {
  FakeServer f;
  {
    std::lock_guard lock(f.state->mutex);
    f.state->on_submit = [](const server::GenerationRequest&, size_t index) {
      if (index == 1) throw SubmitError(SubmitRefusal::kQueueFull, "full");
    };
  }
  const auto r = f.server.post("/v1/completions", {{"prompt", {"Once", "upon", "a time"}}, {"max_tokens", 4}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  std::lock_guard lock(f.state->mutex);
  ASSERT_EQ(f.state->submitted.size(), 1u);
  EXPECT_EQ(f.state->cancelled, std::vector<server::RequestId>{f.state->submitted[0]->id});
}

// The request as the scheduler gets it, and the blocking reply built from its callbacks:
// the tokens' text, the finish reason of its stop, its usage and press.
TEST(ServerRequestPath, ABlockingReplyIsBuiltFromTheSchedulersCallbacks) {
  FakeServer f;
  const Tokenizer& tok = f.model->tokenizer();
  auto answer = f.post_async("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 7}, {"stop", {"zzz"}}});
  const auto s = f.state->wait_for_submit(0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->request.prompt, tok.encode("Once upon", true, false));
  EXPECT_EQ(s->request.max_tokens, 7);
  EXPECT_EQ(s->request.press, nullptr);  // "full"
  const std::vector<int32_t> generated = tok.encode("a time there", false, false);
  s->callbacks.on_start();
  for (int32_t t : generated) EXPECT_TRUE(s->callbacks.on_token(t));
  GenerationOutcome o;
  o.stop = StopReason::kEndOfGeneration;
  o.started = true;
  o.usage.prompt_tokens = static_cast<int64_t>(s->request.prompt.size());
  o.usage.completion_tokens = static_cast<int64_t>(generated.size());
  o.usage.kv_bytes = 1234;
  finish(*s, o);
  const auto r = answer.get();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(r->body);
  EXPECT_EQ(out["choices"][0]["text"], " a time there");  // a continuation: its first word begins with its space
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out["usage"]["completion_tokens"], generated.size());
  EXPECT_EQ(out["usage"]["kv_bytes"], 1234);
  EXPECT_EQ(out["usage"]["kv_press"], "full");
}

// A stream's headers wait for on_start; its chunks carry the tokens' text; a failure inside
// the generation ends it with an error event, then [DONE], never a finish reason.
TEST(ServerRequestPath, AStreamEndsWithAnErrorEventWhenItsGenerationFails) {
  FakeServer f;
  const Tokenizer& tok = f.model->tokenizer();
  auto answer = f.post_async("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 9}, {"stream", true}});
  const auto s = f.state->wait_for_submit(0);
  ASSERT_NE(s, nullptr);
  s->callbacks.on_start();
  const std::vector<int32_t> generated = tok.encode("upon a time", false, false);
  for (int32_t t : generated) s->callbacks.on_token(t);
  GenerationOutcome o;
  o.end = GenerationEnd::kFailed;
  o.started = true;
  o.error = "the fake failed";
  finish(*s, o);
  const auto r = answer.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const std::vector<std::string> events = payloads(r->body);
  ASSERT_GE(events.size(), 3u) << r->body;
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["error"]["type"], "server_error");
  EXPECT_EQ(last["error"]["message"], "the fake failed");
  std::string text;
  for (size_t k = 0; k + 2 < events.size(); ++k) {
    const json chunk = json::parse(events[k]);
    EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null()) << events[k];
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, " upon a time");
}

// Ends without finishing, before any header: a failure is 500 (blocking); a stream that
// ends in the queue at shutdown gets 503 as its status.
TEST(ServerRequestPath, AFailureIs500AndAStreamShutDownInTheQueueIs503) {
  FakeServer f;
  auto blocking = f.post_async("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}});
  auto s = f.state->wait_for_submit(0);
  ASSERT_NE(s, nullptr);
  GenerationOutcome failed;
  failed.end = GenerationEnd::kFailed;
  failed.error = "the fake failed";
  finish(*s, failed);
  auto r = blocking.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["message"], "the fake failed");

  auto streamed = f.post_async("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"stream", true}});
  s = f.state->wait_for_submit(1);
  ASSERT_NE(s, nullptr);
  GenerationOutcome shutdown;
  shutdown.end = GenerationEnd::kShutdown;
  finish(*s, shutdown);
  r = streamed.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "server_shutting_down");
}

// The queue limit on the real scheduler: with one slot generating and max_queue (1)
// waiting, the next request gets 429; /props reports the limit.
TEST(ServerRequestPath, AFullQueueAnswers429) {
  server::ServerOptions o = test_server_options();
  o.model_path = std::string(DEFERKV_SOURCE_DIR) + "/models/deferkv-retrieval-5m.gguf";
  o.n_slots = 1;
  o.threads = 1;
  o.max_queue = 1;
  TestServer t(o);
  EXPECT_EQ(json::parse(t.get("/props")->body)["max_queue"], 1);
  const json long_request = {{"prompt", "Once upon a time"}, {"max_tokens", 3000}, {"ignore_eos", true}};
  std::vector<std::thread> clients;
  struct StopAndJoin {  // also when an assertion returns early: the requests end with the server
    TestServer& t;
    std::vector<std::thread>& clients;
    ~StopAndJoin() {
      t.server().stop();
      for (auto& c : clients) c.join();
    }
  } stop_and_join{t, clients};
  for (const char* metric : {"deferkv_requests_running", "deferkv_requests_waiting"}) {
    clients.emplace_back([&] { t.post("/v1/completions", long_request); });  // 503 once the server stops
    for (int k = 0; k < 2000 && metric_value(t.get("/metrics")->body, metric) != 1; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  const std::string m = t.get("/metrics")->body;
  ASSERT_EQ(metric_value(m, "deferkv_requests_waiting"), 1) << m;
  const auto r = t.post("/v1/completions", long_request);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "rate_limit_exceeded");
}

}  // namespace
}  // namespace deferkv::testing
