// `deferkv bench-serve` end to end: it starts the server in its process on 127.0.0.1, sends
// NIAH prompts from the eval generator, and its JSON report adds up; failed requests and
// bad flags are reported as errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/test_server.h"
#include "tools/cli_runner.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

TEST(BenchServe, ReportsEveryRequestOfAnInProcessServer) {
  const CliResult r = run_cli(
      "bench-serve --task niah --length 200 --samples 3 --clients 3 --requests 6 -n 4 --ignore-eos -t 1 --format json "
      "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  const json report = json::parse(r.output);
  EXPECT_EQ(report["requests"], 6);
  EXPECT_EQ(report["succeeded"], 6);
  EXPECT_EQ(report["failed"], 0);
  EXPECT_EQ(report["generated_tokens"], 6 * 4);  // --ignore-eos: exactly -n each
  // Three NIAH prompts of about 200 tokens, each sent twice.
  EXPECT_GT(report["prompt_tokens"].get<int64_t>(), 6 * 150);
  EXPECT_LE(report["prompt_tokens"].get<int64_t>(), 6 * 200);
  const double wall = report["wall_seconds"];
  EXPECT_NEAR(report["requests_per_second"].get<double>(), 6 / wall, 1e-9);
  EXPECT_NEAR(report["generated_tokens_per_second"].get<double>(), 24 / wall, 1e-9);
  const json& ttft = report["ttft_seconds"];
  const json& latency = report["latency_seconds"];
  EXPECT_GT(ttft["p50"].get<double>(), 0);
  EXPECT_LE(ttft["p50"].get<double>(), ttft["p90"].get<double>());
  EXPECT_LE(ttft["p90"].get<double>(), ttft["p99"].get<double>());
  EXPECT_LE(ttft["max"].get<double>(), latency["max"].get<double>());
  EXPECT_LE(latency["max"].get<double>(), wall);
  EXPECT_GT(report["max_request_kv_peak_bytes"].get<int64_t>(), 0);
  const json& server = report["server_metrics"];
  EXPECT_TRUE(server["available"]);
  EXPECT_GE(server["max_running"].get<int64_t>(), 1);
  EXPECT_LE(server["max_running"].get<int64_t>(), 3);
  EXPECT_GE(server["max_kv_bytes_used"].get<int64_t>(), 0);
  EXPECT_LE(server["max_kv_bytes_used"].get<int64_t>(), 3 * report["max_request_kv_peak_bytes"].get<int64_t>());
  EXPECT_EQ(report["errors"], json::array());
}

TEST(BenchServe, TheMarkdownReportNamesEachMeasure) {
  const CliResult r = run_cli("bench-serve --task random --length 32 --clients 2 --requests 2 -n 3 -t 1 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* row : {"| requests ok / failed | 2 / 0 |", "| generated tok/s (aggregate) |", "| TTFT p50 / p90 / p99 / max s |",
                          "| latency p50 / p90 / p99 / max s |", "| requests running at once, max (/metrics) |",
                          "| KV used, peak of all MiB (/metrics) |"}) {
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  }
}

// The warm-up request fails the command before any timing, naming the server.
TEST(BenchServe, AFailedWarmUpIsAnError) {
  const CliResult r = run_cli("bench-serve --task random --length 32 --requests 2 -n 3 -t 1 --kv-memory 1KiB 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("the warm-up request failed: HTTP 400:"), std::string::npos) << r.output;
}

// A KV cap no request fits in: every request is refused, each error is reported once with
// its count, and the command fails.
TEST(BenchServe, RefusedRequestsAreCountedAndFailTheCommand) {
  const CliResult r =
      run_cli("bench-serve --task random --length 32 --clients 2 --requests 4 -n 3 -t 1 --kv-memory 1KiB --warmup 0 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("| requests ok / failed | 0 / 4 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error: 4 × HTTP 400:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 of 4 requests failed"), std::string::npos) << r.output;
}

// --server: a server whose default press is SnapKV runs each press asked of it, the full
// cache too (bench-serve sent no press for it, and the server's default ran under the
// label "full"): the KV each request held is what the in-process server (default: the full
// cache) gives for the same press.
TEST(BenchServe, EachPressRunsAsAskedOnAServerWhoseDefaultDiffers) {
  server::ServerOptions o = test_server_options();
  o.defaults.press = "snapkv";
  o.defaults.kv_budget = 48;
  TestServer t(o);
  const std::string common = "bench-serve -m " + stories_model_path() +
                             " --task random --length 200 --samples 1 --clients 1 --requests 2 -n 4 --ignore-eos -t 1 "
                             "--warmup 0 --poll-ms 0 --format json 2>/dev/null ";
  const std::string remote = "--server http://127.0.0.1:" + std::to_string(t.server().port());
  for (const std::string press : {"--press full", "--press snapkv --kv-budget 64"}) {
    SCOPED_TRACE(press);
    const CliResult there = run_cli(common + press + " " + remote);
    const CliResult here = run_cli(common + press);
    ASSERT_EQ(there.status, 0) << there.output;
    ASSERT_EQ(here.status, 0) << here.output;
    EXPECT_EQ(json::parse(there.output)["max_request_kv_peak_bytes"], json::parse(here.output)["max_request_kv_peak_bytes"]);
  }
}

TEST(BenchServe, BadFlagsAreClearErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--clients 0", "--clients must be at least 1"},
      {"--requests 0", "--requests must be at least 1"},
      {"--task no_such_task", "--task must be niah, random or a RULER task"},
      {"--press no_such_press --kv-budget 8", "no_such_press"},
      {"--format xml", "--format must be one of md, json"},
      {"--kv-memory lots", "lots"},
      {"--poll-ms -1", "--poll-ms"},
      {"--warmup -1", "--warmup must be 0 or more"},
      {"--server ftp://x", "is not an http(s)://host[:port] URL"},
  };
  for (const auto& [flags, message] : cases) {
    const CliResult r = run_cli("bench-serve --length 8 " + flags + " 2>&1");
    EXPECT_NE(r.status, 0) << flags;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << ": " << r.output;
  }
}

}  // namespace
}  // namespace deferkv::testing
