// `deferkv eval --server`: against deferkv serve on loopback (started and stopped by the
// test), whose greedy rows must equal a local run's sample for sample; and against a fake
// OpenAI server, which shows what each request carries and fails in each way a server
// can (garbage, a timeout, 5xx, no connection), each a clear error naming the URL and the
// sample, with the rows done kept for the rerun that resumes.
// Mutants tried: keeping the server's leading space in the prediction fails
// ScoresAndPredictionsEqualALocalRun and RequestsCarryThePromptIdsPressBudgetAndStop; not
// sending kv_press fails both too (deferkv serve refuses a kv_budget without a press);
// sending none for the full rows (as before) fails ScoresAndPredictionsEqualALocalRun, whose
// server then ran its default snapkv@128 under the label "full" (0.47 MB held, not 1.9 MB).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "server/test_server.h"
#include "support/read_file.h"
#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

const std::string kSweep = "--tasks niah_single_1 --lengths 1k --samples 3 --press 'full;snapkv' --kv-budget 64";

std::string retrieval_model() { return std::string(DEFERKV_SOURCE_DIR) + "/models/deferkv-retrieval-5m.gguf"; }

// The rows of the last run in the results parent `dir`, by label, task, length and index.
std::map<std::string, json> rows_in(const std::string& dir) {
  std::map<std::string, json> rows;
  std::ifstream in(dir + "/latest/samples.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    rows[fmt::format("{} {} {} {}", r["label"].get<std::string>(), r["task"].get<std::string>(),
                     r["length"].get<int64_t>(), r["index"].get<int64_t>())] = r;
  }
  return rows;
}

std::string url_of(int port) { return "http://127.0.0.1:" + std::to_string(port); }

TEST(EvalServer, ScoresAndPredictionsEqualALocalRun) {
  server::ServerOptions o = test_server_options();
  o.model_path = retrieval_model();
  o.n_slots = 2;
  o.threads = 1;
  // The server's default press is none of the rows': each row must run its own (the full
  // cache's row ran this default when eval sent no kv_press for it).
  o.defaults.press = "snapkv";
  o.defaults.kv_budget = 128;
  TestServer server(o);
  gguf_test::TempDir dir;
  const CliResult local = run_cli("eval " + kSweep + " -t 1 -o " + dir.file("local") + " 2>&1");
  ASSERT_EQ(local.status, 0) << local.output;
  const CliResult remote = run_cli("eval " + kSweep + " --server " + url_of(server.server().port()) +
                                   " --concurrency 2 -o " + dir.file("remote") + " 2>&1");
  ASSERT_EQ(remote.status, 0) << remote.output;
  const auto expected = rows_in(dir.file("local")), got = rows_in(dir.file("remote"));
  ASSERT_EQ(expected.size(), 6u);
  ASSERT_EQ(got.size(), 6u);
  for (const auto& [key, row] : expected) {
    ASSERT_TRUE(got.contains(key)) << key;
    EXPECT_EQ(got.at(key)["pred"], row["pred"]) << key;
    EXPECT_EQ(got.at(key)["score"], row["score"]) << key;
    EXPECT_EQ(got.at(key)["prompt_tokens"], row["prompt_tokens"]) << key;
    // The full cache held what it holds locally: every token, none evicted.
    if (row["budget"].is_null()) EXPECT_EQ(got.at(key)["peak_kv_bytes"], row["peak_kv_bytes"]) << key;
    // The server evicted for the SnapKV rows: what it kept is far below the full cache (the
    // sample's full-cache row; the SnapKV row's own peak is lower, evicted inside the prefill).
    if (row["budget"].is_string()) {
      const std::string full = "full" + key.substr(key.find(' '));
      ASSERT_TRUE(got.contains(full)) << full;
      EXPECT_LT(got.at(key)["kv_bytes_after_eviction"].get<int64_t>(), got.at(full)["peak_kv_bytes"].get<int64_t>() / 4);
    }
  }
  // The reports as a local run writes them, scores included.
  const std::string summary = read_file(dir.file("remote") + "/latest/summary.md");
  EXPECT_NE(summary.find("| snapkv@64 |"), std::string::npos) << summary;
}

// An OpenAI-shaped server whose completions answer as `answer` says, given the request's
// body and its number (from 1); it records every request's path, body and Authorization.
class FakeServer {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    double delay_seconds = 0;
  };
  using Answer = std::function<Reply(const json& body, int call)>;

  explicit FakeServer(std::string owned_by = "deferkv") : owned_by_(std::move(owned_by)) {
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"object", "list"}, {"data", {{{"id", "fake.gguf"}, {"owned_by", owned_by_}}}}}.dump(),
                      "application/json");
    });
    auto complete = [this](const httplib::Request& req, httplib::Response& res) {
      Reply reply;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back({req.path, json::parse(req.body), req.get_header_value("Authorization")});
        reply = answer_(requests_.back().body, static_cast<int>(requests_.size()));
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(reply.delay_seconds));
      res.status = reply.status;
      res.set_content(reply.body, "application/json");
    };
    http_.Post("/v1/completions", complete);
    http_.Post("/v1/chat/completions", complete);
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~FakeServer() {
    http_.stop();
    thread_.join();
  }
  void answer_with(Answer answer) {
    std::lock_guard lock(mutex_);
    answer_ = std::move(answer);
  }
  std::string url() const { return url_of(port_); }

  struct Request {
    std::string path;
    json body;
    std::string authorization;
  };
  std::vector<Request> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  std::string owned_by_;
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Request> requests_;
  Answer answer_ = [](const json& body, int) { return completion(body, " 4242."); };

 public:
  // A well-formed answer: the text as completions or chat give it.
  static Reply completion(const json& request, const std::string& text) {
    json choice = {{"index", 0}, {"finish_reason", "stop"}};
    if (request.contains("messages")) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    json usage = {{"completion_tokens", 3}};
    if (request.contains("kv_press")) {  // as deferkv serve says which press it ran
      for (const char* f : {"kv_press", "kv_budget", "kv_ratio"}) usage[f] = request.value(f, json());
    }
    return {200, json{{"choices", {choice}}, {"usage", usage}}.dump(), 0};
  }
};

TEST(EvalServer, RequestsCarryThePromptIdsPressBudgetAndStop) {
  FakeServer fake;
  gguf_test::TempDir dir;
  const CliResult r = run_cli("eval --tasks niah_single_1 --lengths 1k --samples 1 --press 'full;snapkv' --kv-ratio 0.5 "
                              "--server " + fake.url() + " -o " + dir.file("ruler") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto requests = fake.requests();
  ASSERT_EQ(requests.size(), 2u);
  const auto rows = rows_in(dir.file("ruler"));
  for (const auto& q : requests) {
    EXPECT_EQ(q.path, "/v1/completions");
    EXPECT_EQ(q.body["model"], "fake.gguf");
    ASSERT_TRUE(q.body["prompt"].is_array());
    EXPECT_EQ(q.body["prompt"].size(), rows.begin()->second["prompt_tokens"].get<size_t>());
    EXPECT_EQ(q.body["prompt"][0], 1);  // BOS, as sized
    EXPECT_EQ(q.body["max_tokens"], 128);  // RULER's niah tokens to generate
    EXPECT_EQ(q.body["temperature"], 0);
    EXPECT_FALSE(q.body.contains("stop"));
    EXPECT_EQ(q.authorization, "");
  }
  // deferkv serve is told each row's press, the full cache's too (else its default runs).
  int pressed = 0;
  for (const auto& q : requests) {
    ASSERT_TRUE(q.body.contains("kv_press")) << q.body.dump();
    if (q.body["kv_press"] == "full") {
      EXPECT_FALSE(q.body.contains("kv_ratio"));
      EXPECT_FALSE(q.body.contains("kv_budget"));
      continue;
    }
    ++pressed;
    EXPECT_EQ(q.body["kv_press"], "snapkv");
    EXPECT_EQ(q.body["kv_ratio"], 0.5);
    EXPECT_FALSE(q.body.contains("kv_budget"));
  }
  EXPECT_EQ(pressed, 1);
  // The answer's leading space (the server continues the prompt) is not the local decode's.
  for (const auto& [key, row] : rows) {
    EXPECT_EQ(row["pred"], "4242.") << key;
    EXPECT_EQ(row["stop"], "stop") << key;
  }

  // NIAH stops at a newline; the chat API sends the plain prompt as one user message; the
  // key comes from DEFERKV_API_KEY.
  const CliResult niah = run_cli("eval --bench niah --lengths 1k --depths 50 --api chat --server " + fake.url() +
                                 " -o " + dir.file("niah") + " 2>&1");
  ASSERT_EQ(niah.status, 0) << niah.output;
  const CliResult keyed = run_shell("DEFERKV_API_KEY=sesame '" DEFERKV_CLI "' eval --bench niah --lengths 1k --depths 0 "
                                    "--server " + fake.url() + " -o " + dir.file("niah") + " 2>&1");
  ASSERT_EQ(keyed.status, 0) << keyed.output;
  const auto all = fake.requests();
  ASSERT_EQ(all.size(), 4u);
  const json& chat = all[2].body;
  EXPECT_EQ(all[2].path, "/v1/chat/completions");
  ASSERT_EQ(chat["messages"].size(), 1u);
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_NE(chat["messages"][0]["content"].get<std::string>().find("<book>"), std::string::npos);
  EXPECT_EQ(chat["stop"], json::array({"\n"}));
  EXPECT_EQ(all[3].authorization, "Bearer sesame");
}

// Defence in depth: an answer that says it ran another press than its row's (or says
// nothing of it) fails its row, naming both, rather than being labelled with the row's.
TEST(EvalServer, AnAnswerFromAnotherPressFailsItsRow) {
  FakeServer fake;
  fake.answer_with([](const json& body, int) {
    FakeServer::Reply r = FakeServer::completion(body, "1");
    json answer = json::parse(r.body);
    answer["usage"]["kv_press"] = "snapkv";
    answer["usage"]["kv_budget"] = 128;
    answer["usage"]["kv_ratio"] = nullptr;
    r.body = answer.dump();
    return r;
  });
  gguf_test::TempDir dir;
  const std::string command = "eval " + kSweep + " --retries 0 --server " + fake.url() + " -o " + dir.path().string() + " 2>&1";
  const CliResult other = run_cli(command);
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.output.find(fake.url() + ": the server ran snapkv with kv_budget 128, not full as asked"),
            std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("the server ran snapkv with kv_budget 128, not snapkv with kv_budget 64 as asked"),
            std::string::npos)
      << other.output;
  EXPECT_TRUE(rows_in(dir.path().string()).empty());

  fake.answer_with([](const json& body, int) {
    FakeServer::Reply r = FakeServer::completion(body, "1");
    json answer = json::parse(r.body);
    answer["usage"].erase("kv_press");
    r.body = answer.dump();
    return r;
  });
  const CliResult silent = run_cli(command);
  EXPECT_EQ(silent.status, 1);
  EXPECT_NE(silent.output.find("the answer does not say which press the server ran (usage.kv_press), so it cannot "
                               "count as full"),
            std::string::npos)
      << silent.output;
  EXPECT_TRUE(rows_in(dir.path().string()).empty());
}

TEST(EvalServer, AServerThatIsNotDeferkvRunsTheFullCacheRowsOnly) {
  FakeServer fake("llamacpp");
  gguf_test::TempDir dir;
  const CliResult refused = run_cli("eval " + kSweep + " --server " + fake.url() + " -o " + dir.path().string() + " 2>&1");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find(fake.url() + " is not deferkv serve"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--press snapkv"), std::string::npos) << refused.output;
  EXPECT_TRUE(fake.requests().empty());
  const CliResult full = run_cli("eval --tasks niah_single_1 --lengths 1k --samples 2 --server " + fake.url() + " -o " +
                                 dir.path().string() + " 2>&1");
  EXPECT_EQ(full.status, 0) << full.output;
  ASSERT_EQ(fake.requests().size(), 2u);
  for (const auto& q : fake.requests()) EXPECT_FALSE(q.body.contains("kv_press")) << q.body.dump();
}

TEST(EvalServer, GarbageFailsNamingTheUrlAndSampleAndTheRerunResumes) {
  FakeServer fake;
  fake.answer_with([](const json& body, int call) {
    return call <= 2 ? FakeServer::completion(body, "1") : FakeServer::Reply{200, "<html>oops</html>", 0};
  });
  gguf_test::TempDir dir;
  const std::string command = "eval " + kSweep + " --server " + fake.url() + " -o " + dir.path().string() + " 2>&1";
  const CliResult garbage = run_cli(command);
  EXPECT_EQ(garbage.status, 1);
  EXPECT_NE(garbage.output.find(fake.url() + "/v1/completions: the answer is not an OpenAI completion"),
            std::string::npos)
      << garbage.output;
  EXPECT_NE(garbage.output.find("<html>oops</html>"), std::string::npos) << garbage.output;
  EXPECT_NE(garbage.output.find("(sample full niah_single_1 1024 #1)"), std::string::npos) << garbage.output;
  // The two answered rows are kept; the four garbage ones are failed rows (failures.jsonl),
  // and the sweep went on through all six.
  EXPECT_EQ(rows_in(dir.path().string()).size(), 2u);
  EXPECT_EQ(fake.requests().size(), 6u);
  EXPECT_NE(garbage.output.find("error: 4 row(s) failed"), std::string::npos) << garbage.output;

  fake.answer_with([](const json& body, int) { return FakeServer::completion(body, "1"); });
  const CliResult rerun = run_cli(command);
  EXPECT_EQ(rerun.status, 0) << rerun.output;
  EXPECT_EQ(fake.requests().size(), 6u + 4u);  // the four failed rows again, and only them
  EXPECT_EQ(rows_in(dir.path().string()).size(), 6u);
}

TEST(EvalServer, TimeoutsAnd5xxAreRetriedThenFailNamingTheUrl) {
  FakeServer fake;
  // 503 once, then answers: one retry is enough.
  fake.answer_with([](const json& body, int call) {
    return call == 1 ? FakeServer::Reply{503, R"({"error": {"message": "warming up"}})", 0}
                     : FakeServer::completion(body, "1");
  });
  gguf_test::TempDir dir;
  const std::string sweep = "eval --tasks niah_single_1 --lengths 1k --samples 1 --server " + fake.url();
  const CliResult retried = run_cli(sweep + " --retries 1 -o " + dir.file("a") + " 2>&1");
  EXPECT_EQ(retried.status, 0) << retried.output;
  EXPECT_EQ(fake.requests().size(), 2u);

  fake.answer_with([](const json& body, int) { return FakeServer::Reply{503, R"({"error": {"message": "overloaded"}})", 0}; });
  const CliResult unavailable = run_cli(sweep + " --retries 1 -o " + dir.file("b") + " 2>&1");
  EXPECT_EQ(unavailable.status, 1);
  EXPECT_NE(unavailable.output.find(fake.url() + "/v1/completions: HTTP 503: overloaded (tried 2 times)"),
            std::string::npos)
      << unavailable.output;

  fake.answer_with([](const json& body, int) {
    FakeServer::Reply slow = FakeServer::completion(body, "1");
    slow.delay_seconds = 1.5;
    return slow;
  });
  const CliResult timed_out = run_cli(sweep + " --retries 0 --timeout 0.5 -o " + dir.file("c") + " 2>&1");
  EXPECT_EQ(timed_out.status, 1);
  EXPECT_NE(timed_out.output.find(fake.url() + "/v1/completions: no answer within 0.5 s"), std::string::npos)
      << timed_out.output;
  EXPECT_NE(timed_out.output.find("(sample full niah_single_1 1024 #0)"), std::string::npos) << timed_out.output;
}

TEST(EvalServer, AnUnreachableServerOrABadUrlFailsBeforeAnyRow) {
  gguf_test::TempDir dir;
  const CliResult unreachable =
      run_cli("eval " + kSweep + " --server http://127.0.0.1:1 --retries 0 -o " + dir.path().string() + " 2>&1");
  EXPECT_EQ(unreachable.status, 1);
  EXPECT_NE(unreachable.output.find("http://127.0.0.1:1/v1/models: cannot connect"), std::string::npos)
      << unreachable.output;
  const CliResult bad = run_cli("eval " + kSweep + " --server ftp://host -o " + dir.path().string() + " 2>&1");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("'ftp://host' is not an http(s)://host[:port] URL"), std::string::npos) << bad.output;
  const CliResult local = run_cli("eval " + kSweep + " --concurrency 2 -o " + dir.path().string() + " 2>&1");
  EXPECT_EQ(local.status, 1);
  EXPECT_NE(local.output.find("--concurrency is for --server"), std::string::npos) << local.output;
}

}  // namespace
}  // namespace deferkv::testing
