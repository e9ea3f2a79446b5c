// `deferkv generate --press ... --stats-json` and `deferkv presses`, run as the built CLI.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "deferkv/press.h"
#include "tools/cli_runner.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

using testing::run_cli;

const std::string kPrompt =
    "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day she saw a big red ball near the tree. She ran to get it, but a dog came and took the "
    "ball away. Lily was sad and started to cry. Her mom came and hugged her.";

TEST(PressOptions, StatsJsonReportsTheCacheAfterEviction) {
  const gguf_test::TempDir dir;  // fresh, so no earlier run's file can stand in for this one's
  const std::string path = dir.file("stats.json");
  const auto result = run_cli("generate --temp 0 -n 8 -p '" + kPrompt +
                              "' --press deferkv:window=8,pool=all --kv-budget 24 --stats-json '" + path + "' 2>/dev/null");
  ASSERT_EQ(result.status, 0);
  std::ifstream in(path);
  const auto stats = nlohmann::json::parse(in);
  const int64_t prompt = stats["prompt_tokens"];
  EXPECT_GT(prompt, 24);
  EXPECT_EQ(stats["generated_tokens"], 8);
  const auto& after = stats["after_eviction"];
  EXPECT_EQ(after["decode_step"], 1);
  const int64_t heads = stats["kv"]["n_head_kv"], per_entry = stats["kv"]["bytes_per_entry"];
  ASSERT_EQ(after["layers"].size(), stats["kv"]["n_layer"].get<size_t>());
  for (const auto& layer : after["layers"]) {
    // 24 prompt entries per head plus the decode token fed before the eviction.
    EXPECT_EQ(layer["entries"], heads * 25);
    EXPECT_EQ(layer["bytes"], heads * 25 * per_entry);
  }
  // The peak (pool=all, the paper's DeferKV; the default pool is the next test's): the prompt
  // in every layer and step 1's token in the first; each layer is evicted right after its
  // attention at step 1, before the next layer takes its token.
  EXPECT_EQ(stats["kv"]["peak_bytes"].get<int64_t>(),
            (stats["kv"]["n_layer"].get<int64_t>() * prompt + 1) * heads * per_entry);
  EXPECT_GT(stats["seconds"]["capture"].get<double>(), 0.0);
  EXPECT_TRUE(stats["press"].get<std::string>().rfind("deferkv:d=1,eta=0.7", 0) == 0);
  EXPECT_EQ(stats["kv"]["cache_type_k"], "f16");  // the default
  EXPECT_EQ(stats["kv"]["cache_type_v"], "f16");
  // The process's peak resident memory: more than its KV cache ever held (the model and the
  // program besides), and far less than this small run could need.
  const int64_t peak_rss = stats["peak_rss_bytes"];
  EXPECT_GT(peak_rss, stats["kv"]["peak_bytes"].get<int64_t>());
  EXPECT_GT(peak_rss, int64_t{1} << 20);
  EXPECT_LT(peak_rss, int64_t{4} << 30);
}

// DeferKV with a candidate pool of 2 x 24 entries per head: --stats-json reports the pool, and
// the peak is the last layer's whole prompt beside the other layers' pools.
TEST(PressOptions, StatsJsonReportsTheCandidatePool) {
  const gguf_test::TempDir dir;
  const std::string path = dir.file("stats.json");
  const auto result = run_cli("generate --temp 0 -n 4 -p '" + kPrompt +
                              "' --press deferkv:window=8,pool=2x --kv-budget 24 --stats-json '" + path + "' 2>/dev/null");
  ASSERT_EQ(result.status, 0);
  std::ifstream in(path);
  const auto stats = nlohmann::json::parse(in);
  const int64_t prompt = stats["prompt_tokens"];
  ASSERT_GT(prompt, 48);
  const int64_t heads = stats["kv"]["n_head_kv"], per_entry = stats["kv"]["bytes_per_entry"];
  const int64_t layers = stats["kv"]["n_layer"];
  EXPECT_EQ(stats["candidate_pool"]["entries_per_head"], 48);
  EXPECT_EQ(stats["candidate_pool"]["bytes"], 48 * heads * layers * per_entry);
  EXPECT_EQ(stats["kv"]["peak_bytes"].get<int64_t>(), (prompt + (layers - 1) * 48) * heads * per_entry);
  EXPECT_NE(stats["press"].get<std::string>().find(",pool=2x,"), std::string::npos);
}

TEST(PressOptions, StatsJsonHasNoPoolWithoutOne) {
  const gguf_test::TempDir dir;
  const std::string path = dir.file("stats.json");
  ASSERT_EQ(run_cli("generate --temp 0 -n 2 -p 'Once upon a time' --press snapkv:window=2 --kv-budget 3 "
                    "--stats-json '" + path + "' 2>/dev/null").status, 0);
  std::ifstream in(path);
  EXPECT_TRUE(nlohmann::json::parse(in)["candidate_pool"].is_null());
}

TEST(PressOptions, SummaryLineShowsPeakKvAndPeakRss) {
  const auto result = run_cli("generate --temp 0 -n 4 -p 'Once upon a time' 2>&1 >/dev/null");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find(" MiB held, peak "), std::string::npos) << result.output;
  const size_t rss = result.output.find("; peak RSS ");
  ASSERT_NE(rss, std::string::npos) << result.output;
  EXPECT_GT(std::stod(result.output.substr(rss + 11)), 1.0) << result.output;  // MiB
}

TEST(PressOptions, CacheTypeFlagsSetTheStorageAndReportIt) {
  const gguf_test::TempDir dir;
  const std::string path = dir.file("stats.json");
  // stories260K's heads are 8 wide: the float types only.
  const auto result =
      run_cli("generate --temp 0 -n 2 -p 'Once' -ctk bf16 --cache-type-v f32 --stats-json '" + path + "' 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("k bf16, v f32"), std::string::npos) << result.output;
  std::ifstream in(path);
  const auto stats = nlohmann::json::parse(in);
  EXPECT_EQ(stats["kv"]["cache_type_k"], "bf16");
  EXPECT_EQ(stats["kv"]["cache_type_v"], "f32");
  const int64_t head_dim = 8;
  EXPECT_EQ(stats["kv"]["bytes_per_entry"], head_dim * 2 + head_dim * 4 + 4);

  auto r = run_cli("generate -n 1 -p 'Hi' -ctv q4_1 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown KV cache type 'q4_1' (valid: f32, f16, bf16, q8_0, q4_0)"), std::string::npos)
      << r.output;
  r = run_cli("generate -n 1 -p 'Hi' -ctk q8_0 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("key cache type q8_0 stores blocks of 32 values along a head, but the model's head_dim is 8"),
            std::string::npos)
      << r.output;
}

TEST(PressOptions, BadPressInputIsAClearError) {
  auto r = run_cli("generate -n 1 -p 'Hi' --press snapkv 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("press 'snapkv' needs a KV budget: kv_budget (entries per KV head) or kv_ratio"), std::string::npos)
      << r.output;
  r = run_cli("generate -n 1 -p 'Hi' --press deferkv:eta=2 --kv-budget 64 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("eta=2 is out of range"), std::string::npos) << r.output;
  r = run_cli("generate -n 1 -p 'Hi' --press snapkv --kv-budget 64 --kv-ratio 0.5 2>&1");
  EXPECT_EQ(r.status, 1);
  r = run_cli("generate -n 1 -p 'Hi' --kv-budget 64 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("need a --press"), std::string::npos) << r.output;
}

// Budgets that cannot do what they say are errors that name the fix, or warnings.
TEST(PressOptions, BudgetRulesSayTheFix) {
  const std::string prompt = " -p 'Once upon a time there was a little girl named Lily. She loved to play outside in the park.'";
  auto r = run_cli("generate -n 1" + prompt + " --press snapkv --kv-budget 0 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("must be a positive number of entries per head, got 0 (press 'full' keeps every entry)"),
            std::string::npos) << r.output;
  r = run_cli("generate -n 1" + prompt + " --press snapkv --kv-budget 16 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("raise the budget to at least 32, or shrink the window (window=N"), std::string::npos)
      << r.output;
  r = run_cli("generate -n 1" + prompt + " --press snapkv:window=8 --kv-budget 8 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("selects nothing from the rest of the prompt"), std::string::npos) << r.output;
  // A ratio's budget is printed as what it resolves to, and warned about when only the window is left.
  r = run_cli("generate -n 1" + prompt + " --press snapkv:window=8 --kv-ratio 0.9 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(ratio 0.9 = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("only the window is kept"), std::string::npos) << r.output;
}

TEST(PressOptions, BudgetAbovePromptWarnsAndKeepsEverything) {
  const auto full = run_cli("generate --temp 0 -n 16 -p 'Once upon a time' 2>/dev/null");
  const std::string args = "generate --temp 0 -n 16 -p 'Once upon a time' --press snapkv --kv-budget 512";
  const auto pressed = run_cli(args + " 2>/dev/null");
  ASSERT_EQ(pressed.status, 0);
  EXPECT_EQ(pressed.output, full.output);
  const auto log = run_cli(args + " 2>&1 >/dev/null");
  EXPECT_NE(log.output.find("warning: the KV budget (512 entries per head) is not smaller than the prompt"),
            std::string::npos);
}

// The bare command groups the methods by what they read, one line each, scorers starred;
// a name shows its parameters; --all every method's; an unknown name is an error naming it.
TEST(PressesCommand, GroupsTheMethodsAndShowsOnesParameters) {
  const auto r = run_cli("presses");
  ASSERT_EQ(r.status, 0);
  const auto at = [&](const std::string& text) { return r.output.find(text); };
  for (const PressInfo& info : press_catalogue()) EXPECT_NE(at("\n  " + info.name + " "), std::string::npos) << info.name;
  EXPECT_NE(at("  snapkv *"), std::string::npos);
  EXPECT_NE(at("  laq "), std::string::npos);  // not a scorer: no star
  EXPECT_EQ(at("eta="), std::string::npos) << "parameters belong to `presses NAME`";
  // Each method under its group's heading: knorm reads keys, snapkv the prompt's queries,
  // deferkv decode queries, in the order of PressReads.
  const size_t keys = at("The cached keys and values"), prompt = at("The prompt's queries"),
               decode = at("The queries of the answer's first tokens");
  ASSERT_NE(keys, std::string::npos);
  ASSERT_NE(prompt, std::string::npos);
  ASSERT_NE(decode, std::string::npos);
  EXPECT_LT(keys, at("  knorm *"));
  EXPECT_LT(at("  knorm *"), prompt);
  EXPECT_LT(prompt, at("  snapkv *"));
  EXPECT_LT(at("  snapkv *"), decode);
  EXPECT_LT(decode, at("  deferkv "));

  const auto one = run_cli("presses deferkv");
  ASSERT_EQ(one.status, 0);
  for (const char* text : {"deferkv\n", "eta=", "0.7", "temporal_mode=", "no_decode_feedback=", "arXiv 2610.06286",
                           "reads: the queries of the answer's first tokens"}) {
    EXPECT_NE(one.output.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(one.output.find("\nsnapkv"), std::string::npos) << "only the method asked for";
  const auto scorer = run_cli("presses knorm");
  EXPECT_NE(scorer.output.find("knorm (scorer)\n"), std::string::npos) << scorer.output;

  const auto all = run_cli("presses --all");
  ASSERT_EQ(all.status, 0);
  for (const PressInfo& info : press_catalogue()) {
    EXPECT_NE(all.output.find("\n  " + info.summary + "\n"), std::string::npos) << info.name;
  }

  const auto unknown = run_cli("presses snapkv nope 2>&1");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("unknown press method 'nope'"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace deferkv
