// The load generator (src/client/load_generator.h) and what it is made of: the SSE reader,
// the /metrics reader and the percentiles, against hand-computed cases; then 32 clients ×
// 10 requests against the server on 127.0.0.1, every answer checked against generate().
#include <gtest/gtest.h>

#include <cmath>

#include "client/load_generator.h"
#include "client/load_summary.h"
#include "client/prometheus_text.h"
#include "client/sse_events.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "deferkv/model.h"
#include "deferkv/session.h"
#include "deferkv/tokenizer.h"
#include "base/thread_pool.h"
#include "server/test_server.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

TEST(SseReader, EventsEndAtAnEmptyLineWhereverTheBytesAreCut) {
  const std::string stream =
      ": a comment\n"
      "data: {\"a\":1}\n\n"
      "event: ignored\r\n"
      "data:{\"b\":2}\r\n\r\n"
      "data: first line\n"
      "data: second line\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "first line\nsecond line", "[DONE]"};
  client::SseReader whole;
  EXPECT_EQ(whole.feed(stream), expected);
  EXPECT_FALSE(whole.has_partial_event());
  // Cut at every position: the same events, none early.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    client::SseReader reader;
    std::vector<std::string> got = reader.feed(std::string_view(stream).substr(0, cut));
    for (const std::string& e : reader.feed(std::string_view(stream).substr(cut))) got.push_back(e);
    EXPECT_EQ(got, expected) << "cut at " << cut;
  }
  client::SseReader unfinished;
  EXPECT_TRUE(unfinished.feed("data: {\"a\":1}\n").empty());
  EXPECT_TRUE(unfinished.has_partial_event());
}

TEST(MetricValue, ReadsUnlabelledSamplesOnly) {
  const std::string text =
      "# HELP deferkv_requests_running Requests generating now\n"
      "# TYPE deferkv_requests_running gauge\n"
      "deferkv_requests_running 3\n"
      "deferkv_requests_running_total 99\n"
      "deferkv_latency_bucket{le=\"0.5\"} 7\n"
      "deferkv_latency_sum 1.25e-3\n"
      "deferkv_kv_bytes_used 1048576 1700000000\n"
      "deferkv_bad 12abc\n";
  EXPECT_EQ(client::metric_value(text, "deferkv_requests_running"), 3);
  EXPECT_EQ(client::metric_value(text, "deferkv_requests_running_total"), 99);
  EXPECT_EQ(client::metric_value(text, "deferkv_latency_sum"), 1.25e-3);
  EXPECT_EQ(client::metric_value(text, "deferkv_kv_bytes_used"), 1048576);  // a timestamp after the value
  EXPECT_EQ(client::metric_value(text, "deferkv_latency_bucket"), std::nullopt);  // labelled
  EXPECT_EQ(client::metric_value(text, "deferkv_latency"), std::nullopt);
  EXPECT_EQ(client::metric_value(text, "deferkv_bad"), std::nullopt);
  EXPECT_EQ(client::metric_value("", "x"), std::nullopt);
}

TEST(Percentile, InterpolatesBetweenTheNearestRanks) {
  // Ranks 0..4 of 15 20 35 40 50 (given unsorted): p90 is rank 3.6, 40 + 0.6 × 10.
  const std::vector<double> v = {40, 15, 50, 35, 20};
  EXPECT_DOUBLE_EQ(client::percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(client::percentile(v, 50), 35);
  EXPECT_DOUBLE_EQ(client::percentile(v, 90), 46);
  EXPECT_DOUBLE_EQ(client::percentile(v, 99), 49.6);
  EXPECT_DOUBLE_EQ(client::percentile(v, 100), 50);
  EXPECT_DOUBLE_EQ(client::percentile(v, 25), 20);
  EXPECT_DOUBLE_EQ(client::percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(client::percentile({}, 50)));
}

client::SentRequest answered(double ttft, double seconds, int64_t prompt, int64_t generated, int64_t kv_peak) {
  client::SentRequest r;
  r.answer.status = 200;
  r.answer.first_token_seconds = ttft;
  r.answer.seconds = seconds;
  r.answer.usage = {{"prompt_tokens", prompt}, {"completion_tokens", generated}, {"kv_peak_bytes", kv_peak}};
  return r;
}

TEST(LoadSummary, CountsTheSucceededRequestsAndListsEachErrorOnce) {
  client::LoadRun run;
  run.wall_seconds = 4;
  run.requests = {answered(0.1, 1.0, 100, 10, 5000), answered(0.3, 2.0, 200, 20, 9000), answered(0.2, 3.0, 300, 30, 7000)};
  for (int i = 0; i < 2; ++i) {
    client::SentRequest failed;
    failed.answer.status = 400;
    failed.answer.error = "HTTP 400: bad";
    failed.answer.seconds = 100;  // not in the latencies
    failed.answer.usage = {{"completion_tokens", 1000}};
    run.requests.push_back(failed);
  }
  run.server.available = true;
  run.server.max_running = 3;
  const client::LoadSummary s = client::summarize(run);
  EXPECT_EQ(s.requests, 5);
  EXPECT_EQ(s.succeeded, 3);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.prompt_tokens, 600);
  EXPECT_EQ(s.generated_tokens, 60);
  EXPECT_DOUBLE_EQ(s.requests_per_second, 0.75);
  EXPECT_DOUBLE_EQ(s.generated_tokens_per_second, 15);
  EXPECT_DOUBLE_EQ(s.ttft_seconds.p50, 0.2);
  EXPECT_DOUBLE_EQ(s.ttft_seconds.mean, 0.2);
  EXPECT_DOUBLE_EQ(s.latency_seconds.p50, 2.0);
  EXPECT_DOUBLE_EQ(s.latency_seconds.p90, 2.8);
  EXPECT_DOUBLE_EQ(s.latency_seconds.max, 3.0);
  EXPECT_EQ(s.max_request_kv_peak_bytes, 9000);
  EXPECT_EQ(s.server.max_running, 3);
  EXPECT_EQ(s.errors, std::vector<std::string>{"2 × HTTP 400: bad"});
}

// The text generate() gives a prompt alone (greedy), as the server writes it: control
// tokens left out, decoded as a continuation of the prompt.
std::string generated_alone(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt, int64_t n) {
  Session session(model, std::make_shared<ThreadPool>(1));
  Sampler sampler(SamplerParams{.temperature = 0});
  GenerateOptions o;
  o.n_predict = n;
  const GenerateResult r = generate(session, prompt, o, sampler);
  const Tokenizer& tok = model->tokenizer();
  StreamingDecoder decoder(tok, DecodeStart::kContinuation);
  std::string text;
  for (int32_t t : r.tokens) {
    if (tok.token_kind(t) != TokenKind::kControl) text += decoder.push(t);
  }
  return text + decoder.finish();
}

// 32 clients × 10 requests on loopback, 8 slots: every request is answered once, with its
// own prompt's text, and the server counts 320 requests.
TEST(LoadGenerator, ThirtyTwoClientsTimesTenRequestsNothingLostNothingTwice) {
  server::ServerOptions o = test_server_options();
  o.n_slots = 8;
  TestServer t(o);
  const auto model = Model::load(stories_model_path());
  const std::vector<int32_t> base = model->tokenizer().encode("Once upon a time, there was a little", true, false);
  // 40 prompts: the base and one more token each, so an answer given to the wrong request shows.
  constexpr int kDistinct = 40;
  constexpr int64_t kMaxTokens = 6;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> expected;
  for (int i = 0; i < kDistinct; ++i) {
    prompts.push_back(base);
    prompts.back().push_back(100 + 7 * i);
    expected.push_back(generated_alone(model, prompts.back(), kMaxTokens));
  }
  std::vector<json> bodies;
  for (int i = 0; i < 320; ++i) {
    bodies.push_back({{"prompt", prompts[i % kDistinct]}, {"max_tokens", kMaxTokens}, {"temperature", 0}});
  }
  client::ClientOptions co;
  co.url = "http://127.0.0.1:" + std::to_string(t.server().port());
  co.timeout_seconds = 120;
  co.retries = 0;
  client::LoadOptions lo;
  lo.clients = 32;
  lo.metrics_poll_seconds = 0.02;
  const client::LoadRun run = client::run_load(client::OpenAiClient(co), bodies, lo);
  ASSERT_EQ(run.requests.size(), 320u);
  std::vector<int> per_client(32, 0);
  for (size_t i = 0; i < run.requests.size(); ++i) {
    const client::SentRequest& r = run.requests[i];
    EXPECT_EQ(r.index, i);
    EXPECT_EQ(r.answer.error, "") << "request " << i;
    EXPECT_EQ(r.answer.status, 200);
    EXPECT_EQ(r.answer.text, expected[i % kDistinct]) << "request " << i;
    // A failed request has no usage; reading it must not end the test before the others are checked.
    EXPECT_EQ(r.answer.usage.is_object() ? r.answer.usage.value("prompt_tokens", size_t{0}) : size_t{0},
              prompts[i % kDistinct].size());
    EXPECT_LE(r.answer.first_token_seconds, r.answer.seconds);
    ++per_client[static_cast<size_t>(r.client)];
  }
  for (int n : per_client) EXPECT_GE(n, 1);  // every client sent
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_requests_total"), 320);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_used"), 0);
  EXPECT_TRUE(run.server.available);
  EXPECT_LE(run.server.max_running, 8);
  EXPECT_GE(run.server.max_running, 2);  // 32 clients on 8 slots: they overlapped
  const client::LoadSummary s = client::summarize(run);
  EXPECT_EQ(s.succeeded, 320);
  EXPECT_GT(s.generated_tokens_per_second, 0);
}

// A server that is not there: every request fails with why, nothing throws.
TEST(LoadGenerator, AnUnreachableServerFailsEveryRequestNamingWhy) {
  client::ClientOptions co;
  co.url = "http://127.0.0.1:1";
  co.timeout_seconds = 5;
  client::LoadOptions lo;
  lo.clients = 2;
  const client::LoadRun run = client::run_load(client::OpenAiClient(co), {json{{"prompt", "x"}}, json{{"prompt", "y"}}}, lo);
  EXPECT_FALSE(run.server.available);
  for (const auto& r : run.requests) EXPECT_EQ(r.answer.error, "cannot connect");
  EXPECT_EQ(client::summarize(run).errors, std::vector<std::string>{"2 × cannot connect"});
  lo.clients = 0;
  EXPECT_THROW(client::run_load(client::OpenAiClient(co), {}, lo), Error);
}

// What deferkv serve says it ran, against what the body asked ("full" when it names no
// press): equal, or an error naming both.
TEST(PressMismatch, ComparesThePressAndBudgetTheServerSaysItRan) {
  const json full_usage = {{"kv_press", "full"}, {"kv_budget", nullptr}, {"kv_ratio", nullptr}};
  const json snap64 = {{"kv_press", "snapkv"}, {"kv_budget", 64}, {"kv_ratio", nullptr}};
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "full"}}, full_usage), "");
  EXPECT_EQ(client::press_mismatch(json::object(), full_usage), "");
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "snapkv"}, {"kv_budget", 64}}, snap64), "");
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "snapkv"}, {"kv_ratio", 0.5}},
                                   json{{"kv_press", "snapkv"}, {"kv_budget", nullptr}, {"kv_ratio", 0.5}}),
            "");
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "full"}}, snap64),
            "the server ran snapkv with kv_budget 64, not full as asked");
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "snapkv"}, {"kv_budget", 32}}, snap64),
            "the server ran snapkv with kv_budget 64, not snapkv with kv_budget 32 as asked");
  EXPECT_EQ(client::press_mismatch(json{{"kv_press", "snapkv"}, {"kv_budget", 64}}, json{{"completion_tokens", 3}}),
            "the answer does not say which press the server ran (usage.kv_press), so it cannot count as snapkv with "
            "kv_budget 64");
  EXPECT_NE(client::press_mismatch(json{{"kv_press", "full"}}, json()), "");
}

// A server whose default press is SnapKV: a body that asks for the full cache gets it (every
// token kept), one that names no press gets the default, and check_press fails it rather
// than count it as the full cache.
TEST(LoadGenerator, CheckPressFailsAnAnswerFromAnotherPress) {
  server::ServerOptions o = test_server_options();
  o.defaults.press = "snapkv";
  o.defaults.kv_budget = 40;
  TestServer t(o);
  std::string text;
  for (int i = 0; i < 4; ++i) text += "Once upon a time, there was a little girl named Lily who loved to play outside. ";
  const std::vector<int32_t> prompt = Model::load(stories_model_path())->tokenizer().encode(text, true, false);
  ASSERT_GT(prompt.size(), 80u);  // past the budget: SnapKV evicts
  json full = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"kv_press", "full"}};
  json snap = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"kv_press", "snapkv"}, {"kv_budget", 40}};
  json unnamed = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  client::ClientOptions co;
  co.url = "http://127.0.0.1:" + std::to_string(t.server().port());
  co.retries = 0;
  client::LoadOptions lo;
  lo.clients = 1;
  lo.metrics_poll_seconds = 0;
  lo.check_press = true;
  const client::LoadRun run = client::run_load(client::OpenAiClient(co), {full, snap, unnamed}, lo);
  ASSERT_EQ(run.requests.size(), 3u);
  EXPECT_EQ(run.requests[0].answer.error, "");
  EXPECT_EQ(run.requests[1].answer.error, "");
  EXPECT_EQ(run.requests[2].answer.error, "the server ran snapkv with kv_budget 40, not full as asked");
  const json& u_full = run.requests[0].answer.usage;
  const json& u_snap = run.requests[1].answer.usage;
  EXPECT_EQ(u_full["kv_press"], "full");
  EXPECT_GT(u_full["kv_entries_kept"].get<int64_t>(), u_snap["kv_entries_kept"].get<int64_t>());
  EXPECT_GT(u_full["kv_peak_bytes"].get<int64_t>(), u_snap["kv_peak_bytes"].get<int64_t>());
}

}  // namespace
}  // namespace deferkv::testing
