// `deferkv serve`'s HTTP layer, in process on 127.0.0.1 and a free port, with
// cpp-httplib's client. Greedy outputs are checked against `deferkv generate`.
#include <gtest/gtest.h>

#include <thread>

#include "client/sse_events.h"
#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "server/test_server.h"
#include "tools/cli_runner.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

const std::string kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
    "One day, she saw a big red ball in the park";

// `deferkv generate --temp 0` on the same prompt: the text it prints, without the newline.
std::string generate_reference(const std::string& prompt, int n, const std::string& press_flags) {
  const CliResult r = run_cli("generate --temp 0 -t 1 -n " + std::to_string(n) + " -p '" + prompt + "' " +
                              press_flags + " 2>/dev/null");
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.output.empty());
  return r.output.substr(0, r.output.size() - 1);
}

json parse(const httplib::Result& r) {
  EXPECT_TRUE(r) << "no response";
  return r ? json::parse(r->body) : json();
}

// The SSE events of a streamed response; checks the framing: every event is one
// "data: ...\n\n" line, and the last is [DONE].
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  size_t at = 0;
  bool done = false;
  while (at < body.size()) {
    EXPECT_FALSE(done) << "events after [DONE]";
    EXPECT_EQ(body.compare(at, 6, "data: "), 0) << body.substr(at);
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string data = body.substr(at + 6, end - at - 6);
    EXPECT_EQ(data.find('\n'), std::string::npos);
    if (data == "[DONE]") {
      done = true;
    } else {
      events.push_back(json::parse(data));
    }
    at = end + 2;
  }
  EXPECT_TRUE(done) << "no data: [DONE]";
  return events;
}

// The streamed text, the last chunk's finish_reason and its usage.
struct Streamed {
  std::string text;
  std::string finish_reason;
  json usage;
};
Streamed read_stream(const std::string& body, bool chat) {
  Streamed s;
  for (const json& e : sse_events(body)) {
    const json& c = e["choices"][0];
    if (chat) {
      if (c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    } else {
      s.text += c["text"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) {
      s.finish_reason = c["finish_reason"];
      s.usage = e["usage"];
    }
  }
  return s;
}

TEST(HttpServer, HealthIs503WhileLoadingThen200) {
  TestServer t(test_server_options(), /*load=*/false);
  auto loading = t.get("/health");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_TRUE(json::parse(loading->body)["error"]["message"].is_string());
  EXPECT_EQ(t.post("/v1/completions", {{"prompt", "x"}})->status, 503);
  t.server().load_model();
  auto ready = t.get("/health");
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(json::parse(ready->body)["status"], "ok");
}

TEST(HttpServer, GreedyCompletionEqualsGenerateFullAndCompressed) {
  TestServer t;
  int64_t full_cache_bytes = 0;
  for (const auto& [press, flags] : std::vector<std::pair<json, std::string>>{
           {json{{"kv_press", "full"}}, ""},
           {json{{"kv_press", "snapkv:window=4"}, {"kv_budget", 8}}, "--press snapkv:window=4 --kv-budget 8"},
           {json{{"kv_press", "snapkv:window=4+moment_kv:decode_budget=4"}, {"kv_budget", 8}},
            "--press snapkv:window=4+moment_kv:decode_budget=4 --kv-budget 8"}}) {
    json body = {{"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0}};
    body.update(press);
    const json r = parse(t.post("/v1/completions", body));
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], generate_reference(kPrompt, 24, flags)) << flags;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    const json& u = r["usage"];
    EXPECT_EQ(u["completion_tokens"], 24);
    EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + 24);
    if (flags.empty()) {
      EXPECT_EQ(u["kv_bytes"], u["kv_peak_bytes"]);  // nothing evicted
      full_cache_bytes = u["kv_bytes"].get<int64_t>();
    } else {
      // Evicted (inside the prefill, so the peak is below the full cache's too).
      EXPECT_LT(u["kv_bytes"].get<int64_t>(), full_cache_bytes) << flags;
      EXPECT_LT(u["kv_peak_bytes"].get<int64_t>(), full_cache_bytes) << flags;
    }
  }
}

TEST(HttpServer, StreamedCompletionFramesTheSameText) {
  TestServer t;
  const json body = {{"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}, {"kv_press", "snapkv:window=4"}, {"kv_budget", 8}};
  const json whole = parse(t.post("/v1/completions", body));
  json streamed_body = body;
  streamed_body["stream"] = true;
  auto r = t.post("/v1/completions", streamed_body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const Streamed s = read_stream(r->body, false);
  EXPECT_EQ(s.text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 16);
  EXPECT_EQ(s.usage["kv_bytes"], whole["usage"]["kv_bytes"]);
}

TEST(HttpServer, ChatAppliesTheTemplateStreamingAndNot) {
  TestServer t;
  const CliResult ref = run_cli("generate --temp 0 -t 1 -n 12 --chat --chat-template chatml -p 'Tell me a story' 2>/dev/null");
  ASSERT_EQ(ref.status, 0);
  const std::string expected = ref.output.substr(0, ref.output.size() - 1);
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 12}, {"temperature", 0}};
  const json r = parse(t.post("/v1/chat/completions", body));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], expected);
  // The prompt is the template's: more tokens than the message alone.
  auto model = Model::load(stories_model_path());
  EXPECT_GT(r["usage"]["prompt_tokens"].get<size_t>(), model->tokenizer().encode("Tell me a story", true, false).size());
  body["stream"] = true;
  auto s = t.post("/v1/chat/completions", body);
  ASSERT_TRUE(s);
  const std::vector<json> events = sse_events(s->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(read_stream(s->body, true).text, expected);
}

TEST(HttpServer, StopStringsEndTheCompletion) {
  TestServer t;
  const std::string full = parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0}}))
                               ["choices"][0]["text"];
  const std::string stop = full.substr(6, 3);  // three characters from the middle
  const size_t cut = full.find(stop);
  for (bool stream : {false, true}) {
    auto r = t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0},
                                        {"stop", json::array({"zzzz", stop})}, {"stream", stream}});
    ASSERT_TRUE(r);
    const std::string text =
        stream ? read_stream(r->body, false).text : json::parse(r->body)["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(text, full.substr(0, cut)) << stream;
  }
}

TEST(HttpServer, TokenizeAndDetokenize) {
  TestServer t;
  auto model = Model::load(stories_model_path());
  const Tokenizer& tok = model->tokenizer();
  const json r = parse(t.post("/tokenize", {{"content", "Once upon a time"}}));
  std::vector<int32_t> ids = r["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok.encode("Once upon a time", false, true));
  const json with_bos = parse(t.post("/tokenize", {{"content", "Once"}, {"add_special", true}, {"with_pieces", true}}));
  EXPECT_EQ(with_bos["tokens"][0]["id"], tok.bos_id());
  EXPECT_EQ(with_bos["tokens"][1]["piece"], tok.token_piece(tok.encode("Once", false, true)[0]));
  EXPECT_EQ(parse(t.post("/detokenize", {{"tokens", ids}}))["content"], "Once upon a time");
  auto bad = t.post("/detokenize", {{"tokens", {1, 99999999}}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "tokens");
}

TEST(HttpServer, ModelsPropsAndMetrics) {
  server::ServerOptions o = test_server_options();
  o.n_slots = 3;
  o.kv_memory_bytes = 5 << 20;
  TestServer t(o);
  const json models = parse(t.get("/v1/models"));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "stories260K.gguf");
  const json props = parse(t.get("/props"));
  EXPECT_EQ(props["total_slots"], 3);
  EXPECT_EQ(props["kv_memory_bytes"], 5 << 20);
  EXPECT_EQ(props["chat_template"], "chatml");
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 2; ++i) {
    prompt_tokens += parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 5}}))["usage"]["prompt_tokens"]
                         .get<int64_t>();
  }
  auto m = t.get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  const std::string& text = m->body;
  EXPECT_EQ(metric_value(text, "deferkv_requests_total"), 2);
  EXPECT_EQ(metric_value(text, "deferkv_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(metric_value(text, "deferkv_generated_tokens_total"), 10);
  EXPECT_EQ(metric_value(text, "deferkv_requests_running"), 0);
  EXPECT_EQ(metric_value(text, "deferkv_requests_waiting"), 0);
  EXPECT_EQ(metric_value(text, "deferkv_kv_bytes_used"), 0);
  EXPECT_EQ(metric_value(text, "deferkv_kv_bytes_capacity"), 5 << 20);
  EXPECT_EQ(metric_value(text, "deferkv_requests_pooled"), 0);
  EXPECT_EQ(metric_value(text, "deferkv_kv_bytes_pooled"), 0);
  EXPECT_EQ(metric_value(text, "deferkv_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(metric_value(text, "deferkv_request_latency_seconds_count"), 2);
  EXPECT_NE(text.find("deferkv_request_latency_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE deferkv_time_to_first_token_seconds histogram"), std::string::npos);
}

// Four requests at once, each with another press, give what each gives alone.
TEST(HttpServer, ConcurrentRequestsWithDifferentPressesEqualTheirOneByOneResults) {
  server::ServerOptions o = test_server_options();
  o.n_slots = 8;
  TestServer t(o);
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"kv_press", "full"}}, ""},
      {json{{"kv_press", "snapkv:window=4"}, {"kv_budget", 8}}, "--press snapkv:window=4 --kv-budget 8"},
      {json{{"kv_press", "deferkv:d=1,window=4"}, {"kv_budget", 6}}, "--press deferkv:d=1,window=4 --kv-budget 6"},
      {json{{"kv_press", "streaming_llm"}, {"kv_ratio", 0.5}}, "--press streaming_llm --kv-ratio 0.5"},
      {json{{"kv_press", "h2o:window=4"}, {"kv_budget", 8}}, "--press h2o:window=4 --kv-budget 8"},
      {json{{"kv_press", "tova"}, {"kv_budget", 6}}, "--press tova --kv-budget 6"},
      {json{{"kv_press", "adakv:window=4"}, {"kv_ratio", 0.5}}, "--press adakv:window=4 --kv-ratio 0.5"},
      {json{{"kv_press", "knorm"}, {"kv_budget", 8}}, "--press knorm --kv-budget 8"}};
  std::vector<std::string> got(cases.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < cases.size(); ++i) {
    clients.emplace_back([&, i] {
      json body = {{"prompt", kPrompt}, {"max_tokens", 20}, {"temperature", 0}, {"stream", i % 2 == 1}};
      body.update(cases[i].first);
      auto r = t.post("/v1/completions", body);
      if (!r) return;
      got[i] = i % 2 == 1 ? read_stream(r->body, false).text : json::parse(r->body)["choices"][0]["text"].get<std::string>();
    });
  }
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], generate_reference(kPrompt, 20, cases[i].second)) << cases[i].second;
}

// A KV cap that holds one full request: eight sent at once queue and all complete, and
// one that could never fit is refused.
TEST(HttpServer, SmallKvMemoryQueuesRequestsAndAllComplete) {
  TestServer probe;
  const json one = parse(probe.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 10}, {"temperature", 0}}));
  const int64_t need = one["usage"]["kv_peak_bytes"];
  server::ServerOptions o = test_server_options();
  o.n_slots = 4;
  o.kv_memory_bytes = need + need / 2;
  TestServer t(o);
  std::vector<std::string> texts(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < texts.size(); ++i) {
    clients.emplace_back([&, i] {
      auto r = t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 10}, {"temperature", 0}});
      if (r && r->status == 200) texts[i] = json::parse(r->body)["choices"][0]["text"];
    });
  }
  for (auto& c : clients) c.join();
  for (const auto& text : texts) EXPECT_EQ(text, one["choices"][0]["text"].get<std::string>());
  auto refused = t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 200}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "kv_memory_exceeded");
}

// ignore_eos (llama.cpp's extension) generates max_tokens past the end of generation. The
// embedded retrieval model answers this question greedily in 40 tokens and then ends; with
// ignore_eos it goes on to max_tokens, its first 40 tokens' text the same.
TEST(HttpServer, IgnoreEosGeneratesPastTheEndOfGeneration) {
  server::ServerOptions o = test_server_options();
  o.model_path = std::string(DEFERKV_SOURCE_DIR) + "/models/deferkv-retrieval-5m.gguf";
  TestServer t(o);
  const json body = {{"prompt", "The special magic number for apple is 42. What is the special magic number for apple?"},
                     {"max_tokens", 80},
                     {"temperature", 0}};
  const json ending = parse(t.post("/v1/completions", body));
  ASSERT_EQ(ending["choices"][0]["finish_reason"], "stop") << ending.dump();
  const int64_t answer_tokens = ending["usage"]["completion_tokens"].get<int64_t>();
  EXPECT_LT(answer_tokens, 80);
  json ignoring_body = body;
  ignoring_body["ignore_eos"] = true;
  const json ignoring = parse(t.post("/v1/completions", ignoring_body));
  EXPECT_EQ(ignoring["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ignoring["usage"]["completion_tokens"], 80);
  const std::string answer = ending["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(ignoring["choices"][0]["text"].get<std::string>().substr(0, answer.size()), answer);
  EXPECT_EQ(parse(t.post("/v1/completions", {{"prompt", "a"}, {"ignore_eos", "yes"}}))["error"]["param"], "ignore_eos");
}

// Each bad request gets a 4xx in OpenAI's error shape; the valid ones between them succeed.
TEST(HttpServer, MalformedRequestsGet4xxAndTheServerKeepsServing) {
  server::ServerOptions o = test_server_options();
  o.max_body_bytes = 64 << 10;
  TestServer t(o);
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 400; ++i) s += "the dog ran and ";
    return s;
  }();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/v1/completions", "{"},
      {"/v1/completions", "[]"},
      {"/v1/completions", "null"},
      {"/v1/completions", R"({"max_tokens": 4})"},
      {"/v1/completions", R"({"prompt": 5})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -1})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 1e300})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 99999999999999999999})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 2000000})"},
      {"/v1/completions", R"({"prompt": "x", "echo": true})"},
      {"/v1/completions", R"({"prompt": "x", "temperature": "hot"})"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 2})"},
      {"/v1/completions", R"({"prompt": "x", "seed": -3})"},
      {"/v1/completions", R"({"prompt": "x", "stream": "yes"})"},
      {"/v1/completions", R"({"prompt": "x", "stop": [1]})"},
      {"/v1/completions", R"({"prompt": "x", "kv_press": "no_such_press"})"},
      {"/v1/completions", R"({"prompt": "x", "kv_press": "snapkv"})"},
      {"/v1/completions", R"({"prompt": "x", "kv_press": "snapkv:bogus=1", "kv_budget": 4})"},
      {"/v1/completions", R"({"prompt": "x", "kv_press": "snapkv", "kv_budget": 4, "kv_ratio": 0.5})"},
      {"/v1/completions", R"({"prompt": "x", "kv_budget": 4})"},
      {"/v1/completions", "{\"prompt\": \"\xff\xfe\"}"},
      {"/v1/completions", json{{"prompt", long_prompt}}.dump()},
      {"/v1/completions", std::string(1 << 20, 'g')},
      {"/v1/chat/completions", R"({"messages": "hi"})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})"},
      {"/tokenize", R"({"content": 3})"},
      {"/detokenize", R"({"tokens": "abc"})"},
  };
  for (const auto& [path, body] : bad) {
    auto r = t.client()->Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(r) << body.substr(0, 80);
    EXPECT_GE(r->status, 400) << body.substr(0, 80);
    EXPECT_LT(r->status, 500) << body.substr(0, 80);
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_TRUE(e["error"]["type"].is_string());
    EXPECT_TRUE(e["error"].contains("param") && e["error"].contains("code"));
    auto ok = t.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 3}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << "after " << body.substr(0, 80);
  }
  EXPECT_EQ(t.get("/no/such/endpoint")->status, 404);
  EXPECT_EQ(parse(t.get("/no/such/endpoint"))["error"]["message"], "no such endpoint");
}

// A press the session cannot run (SpecKV without a draft model) fails that request with a
// 500, and the server goes on.
TEST(HttpServer, AFailureInsideOneRequestFailsOnlyThatRequest) {
  TestServer t;
  auto r = t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 4}, {"kv_press", "speckv:window=4"}, {"kv_budget", 8}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "server_error");
  EXPECT_EQ(t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 4}})->status, 200);
}

// A client that goes away mid-stream cancels its request: its KV is freed and it stops
// long before max_tokens.
TEST(HttpServer, AClientThatDisconnectsMidStreamFreesItsKv) {
  TestServer t;
  const json body = {{"prompt", kPrompt}, {"max_tokens", 400}, {"stream", true}};
  auto client = t.client();
  httplib::Request req = completion_post(body);
  client::SseReader sse;  // leaves after 3 events, not 3 reads: one read may hold many events
  size_t events = 0;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    events += sse.feed(std::string_view(data, size)).size();
    return events < 3;
  };
  auto r = client->send(req);
  EXPECT_FALSE(r);  // the client cancelled the read
  client.reset();   // closes the connection
  // Bounded: the server notices at its next write, within one token.
  const std::string metrics = metrics_once_finished(t, 1);
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_total"), 1) << metrics;
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_running"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_used"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_reserved"), 0);
  EXPECT_LT(metric_value(metrics, "deferkv_generated_tokens_total"), 400);
}

// SIGTERM: the CLI stops accepting, cancels what runs, and exits 0.
TEST(ServeCommand, SigtermShutsDownCleanlyWithExitStatusZero) {
  const gguf_test::TempDir dir;  // fresh: an earlier run's log saying "listening" must not stand in
  const std::string log = dir.file("serve.log");
  const CliResult r = run_shell(std::string("'") + DEFERKV_CLI + "' serve --port 0 -np 2 -t 1 2>'" + log + "' & pid=$!; " +
                                "for i in $(seq 100); do grep -qs listening '" + log + "' && break; sleep 0.1; done; " +
                                "kill -TERM $pid; wait $pid; echo \"exit=$?\"; cat '" + log + "'");
  EXPECT_NE(r.output.find("listening on http://127.0.0.1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exit=0"), std::string::npos) << r.output;
}

TEST(HttpServer, APromptOfTokenIdsIsTakenAsItIs) {
  TestServer t;
  const json ids = parse(t.post("/tokenize", {{"content", kPrompt}, {"add_special", true}}))["tokens"];
  const json as_text = parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}}));
  const json as_ids = parse(t.post("/v1/completions", {{"prompt", ids}, {"max_tokens", 12}, {"temperature", 0}}));
  ASSERT_TRUE(as_ids.contains("choices")) << as_ids.dump();
  EXPECT_EQ(as_ids["choices"][0]["text"], as_text["choices"][0]["text"]);
  EXPECT_EQ(as_ids["usage"]["prompt_tokens"], ids.size());
  EXPECT_GT(as_ids["usage"]["prefill_ms"].get<double>(), 0);
  EXPECT_GT(as_ids["usage"]["decode_ms"].get<double>(), 0);
  for (const json& bad : {json::array({1, 100000}), json::array(), json::array({1, "x"})}) {
    auto r = t.post("/v1/completions", {{"prompt", bad}, {"max_tokens", 4}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad.dump();
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "prompt") << r->body;
  }
}

}  // namespace
}  // namespace deferkv::testing
