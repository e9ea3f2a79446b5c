// The server under faults, on 127.0.0.1: 200 malformed requests (cut JSON, fuzzed JSON,
// wrong types, huge numbers, invalid UTF-8, bad token ids, 1 MiB of garbage) sent by four
// clients at once, each followed by a valid one; and streaming clients that go away
// mid-stream while others finish. Bounded: tiny requests on the embedded stories260K.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "client/openai_client.h"
#include "client/sse_events.h"
#include "server/test_server.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

struct BadRequest {
  std::string path;
  std::string body;
};

// A request that no server may accept, of kind `i % 8`, drawn from `rng`. Each kind is
// invalid by construction, so that no draw can make a valid request by chance.
BadRequest malformed(int i, std::mt19937& rng) {
  auto pick = [&](const auto& options) { return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)]; };
  auto below = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const std::string valid = R"({"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0})";
  switch (i % 8) {
    case 0:  // valid JSON cut before its closing brace
      return {"/v1/completions", valid.substr(0, below(valid.size()))};
    case 1: {  // fuzzed: an object opened and never closed (no '}' in the alphabet)
      static const std::string alphabet = "[]\":,0123456789abcdefxyz -.\\{";
      std::string body = "{";
      for (size_t n = 1 + below(200); n > 0; --n) body += alphabet[below(alphabet.size())];
      return {"/v1/completions", body};
    }
    case 2: {  // a field of the wrong type
      static const std::vector<std::pair<std::string, std::string>> wrong = {
          {"prompt", "5"},          {"prompt", "true"},      {"prompt", "{\"a\": 1}"}, {"max_tokens", "\"3\""},
          {"max_tokens", "3.5"},    {"max_tokens", "[3]"},   {"temperature", "\"hot\""}, {"top_p", "{}"},
          {"stream", "\"yes\""},    {"stream", "1"},         {"stop", "5"},            {"stop", "[1]"},
          {"stop", "[\"\"]"},       {"kv_press", "7"},       {"kv_budget", "\"8\""},   {"kv_budget", "2.5"},
          {"seed", "\"s\""},        {"ignore_eos", "\"yes\""}, {"top_k", "[]"},        {"min_p", "false"}};
      const auto& [name, value] = pick(wrong);
      std::string body = name == "prompt" ? "{" : R"({"prompt": "Once upon a time", )";
      return {"/v1/completions", body + "\"" + name + "\": " + value + "}"};
    }
    case 3: {  // a number far out of range
      static const std::vector<std::pair<std::string, std::string>> huge = {
          {"max_tokens", "1e300"}, {"max_tokens", "99999999999999999999"}, {"max_tokens", "-1e30"},
          {"max_tokens", "4294967297"}, {"kv_budget", "9223372036854775808"}, {"temperature", "1e308"},
          {"top_k", "1e20"}, {"seed", "-9223372036854775808"}, {"top_p", "-1e-300"}, {"min_p", "1e400"}};
      const auto& [name, value] = pick(huge);
      const std::string press = name == "kv_budget" ? R"("kv_press": "snapkv", )" : "";
      return {"/v1/completions", R"({"prompt": "Once upon a time", )" + press + "\"" + name + "\": " + value + "}"};
    }
    case 4: {  // invalid UTF-8 inside the prompt string
      static const std::vector<std::string> bad_bytes = {"\xff", "\xfe", "\xc0\x80", "\x80", "\xed\xa0\x80", "\xf5\x80\x80\x80",
                                                         "\xe2\x82", "\xc3"};
      std::string text = "Once upon a time";
      text.insert(below(text.size() + 1), pick(bad_bytes));
      return {i % 16 < 8 ? "/v1/completions" : "/tokenize",
              std::string(i % 16 < 8 ? R"({"prompt": ")" : R"({"content": ")") + text + "\"}"};
    }
    case 5: {  // token ids outside the vocabulary, or not ids
      static const std::vector<std::string> ids = {"[-1]", "[1, 10000000000]", "[1, 512]", "[1, \"a\"]", "[]", "[1.5]"};
      return {i % 16 < 8 ? "/v1/completions" : "/detokenize",
              std::string(i % 16 < 8 ? R"({"prompt": )" : R"({"tokens": )") + pick(ids) + "}"};
    }
    case 6: {  // the server's own rules: presses, budgets, the context, chat messages
      static const std::vector<BadRequest> rules = {
          {"/v1/completions", R"({"prompt": "x", "kv_press": "no_such_press", "kv_budget": 4})"},
          {"/v1/completions", R"({"prompt": "x", "kv_budget": 4})"},
          {"/v1/completions", R"({"prompt": "x", "kv_press": "snapkv", "kv_budget": 4, "kv_ratio": 0.5})"},
          {"/v1/completions", R"({"prompt": "x", "n": 2})"},
          {"/v1/chat/completions", R"({"messages": "hi"})"},
          {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})"},
          {"/v1/chat/completions", R"({"messages": []})"}};
      return pick(rules);
    }
    default: {  // 1 MiB of random bytes, every other time as many printable ones
      std::string body(size_t{1} << 20, ' ');
      for (char& c : body) c = static_cast<char>(i % 16 < 8 ? below(256) : 32 + below(95));
      return {"/v1/completions", body};
    }
  }
}

// 200 malformed requests from 4 clients at once, each followed by a valid one (streamed
// every other time): every bad one gets a 4xx in OpenAI's error shape, every valid one
// succeeds, and the server is healthy and idle at the end.
TEST(FaultInjection, TwoHundredMalformedRequestsInterleavedWithValidOnes) {
  server::ServerOptions o = test_server_options();
  o.n_slots = 4;
  TestServer t(o);
  client::ClientOptions co;
  co.url = "http://127.0.0.1:" + std::to_string(t.server().port());
  co.timeout_seconds = 60;
  co.retries = 0;
  const client::OpenAiClient api(co);
  constexpr int kClients = 4;
  constexpr int kBadPerClient = 50;
  std::vector<std::string> failures[kClients];
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(1000 + c);
      auto http = t.client();
      for (int k = 0; k < kBadPerClient; ++k) {
        const int i = c * kBadPerClient + k;
        const BadRequest bad = malformed(i, rng);
        const std::string shown = bad.path + " " + bad.body.substr(0, 80);
        auto r = http->Post(bad.path.c_str(), bad.body, "application/json");
        if (!r) {
          failures[c].push_back("no answer to " + shown);
        } else {
          const json e = json::parse(r->body, nullptr, false);
          if (r->status < 400 || r->status >= 500) failures[c].push_back(std::to_string(r->status) + " for " + shown);
          if (!e.is_object() || !e.contains("error") || !e["error"].is_object() || !e["error"]["message"].is_string() ||
              !e["error"]["type"].is_string()) {
            failures[c].push_back("not an error body for " + shown + ": " + r->body.substr(0, 200));
          }
        }
        const json valid = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}};
        if (k % 2 == 0) {
          const client::StreamedAnswer a = api.stream(valid, false);
          if (!a.error.empty()) failures[c].push_back("valid streamed request after " + shown + ": " + a.error);
        } else {
          auto ok = http->Post("/v1/completions", valid.dump(), "application/json");
          if (!ok || ok->status != 200 || !json::parse(ok->body)["choices"][0]["text"].is_string()) {
            failures[c].push_back("valid request after " + shown + " failed");
          }
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  for (const auto& list : failures) {
    for (const auto& f : list) ADD_FAILURE() << f;
  }
  EXPECT_EQ(t.get("/health")->status, 200);
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_total"), kClients * kBadPerClient);  // the valid ones only
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_used"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_reserved"), 0);
}

// Six streaming clients on three slots, three of which go away after 1, 3 and 8 events
// (one of them may still be waiting for a slot): the others get all their tokens, and once
// idle the server holds no KV.
TEST(FaultInjection, ClientsThatDisconnectMidStreamFreeTheirKvOthersFinish) {
  server::ServerOptions o = test_server_options();
  o.n_slots = 3;
  TestServer t(o);
  constexpr int64_t kMaxTokens = 200;
  const json body = {{"prompt", "Once upon a time, there was a little girl"}, {"max_tokens", kMaxTokens},
                     {"ignore_eos", true}, {"stream", true}, {"temperature", 0}};
  const int stop_after[6] = {1, 0, 3, 0, 8, 0};  // events read before leaving; 0: read to the end
  std::vector<int64_t> completion_tokens(6, -1);
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      auto http = t.client();
      httplib::Request req = completion_post(body);
      std::string received;
      // Counts events, not reads: a loaded machine hands over several events (or the whole
      // stream) in one read, and a client counting reads then read to the end.
      client::SseReader sse;
      int64_t events = 0;
      req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
        received.append(data, size);
        events += static_cast<int64_t>(sse.feed(std::string_view(data, size)).size());
        return stop_after[c] == 0 || events < stop_after[c];
      };
      const auto r = http->send(req);
      if (stop_after[c] != 0) {
        EXPECT_FALSE(r) << "client " << c << " read to the end";
        return;
      }
      const size_t usage = received.rfind("\"completion_tokens\":");
      if (r && usage != std::string::npos) completion_tokens[c] = std::stoll(received.substr(usage + 20));
    });
  }
  for (auto& c : clients) c.join();
  for (int c = 1; c < 6; c += 2) EXPECT_EQ(completion_tokens[c], kMaxTokens) << "client " << c;
  const std::string metrics = metrics_once_finished(t, 6);  // each cancel lands within one token
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_total"), 6) << metrics;
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_running"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_waiting"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_used"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_reserved"), 0);
  EXPECT_LT(metric_value(metrics, "deferkv_generated_tokens_total"), 6 * kMaxTokens);
}

}  // namespace
}  // namespace deferkv::testing
