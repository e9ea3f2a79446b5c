// `deferkv eval` end to end with the embedded model: a small RULER sweep (2 presses x 2
// budgets x 2 tasks) and a small NIAH grid produce every report file, record the
// configuration, and resume.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tensor/gguf_test_util.h"
#include "support/read_file.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

std::string read(const std::filesystem::path& path) { return testing::read_file(path.string()); }

size_t lines_of(const std::filesystem::path& path) {
  const std::string text = read(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The one results folder under `parent` (beside the `latest` link to it).
std::filesystem::path results_folder(const std::filesystem::path& parent) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(parent)) {
    if (entry.path().filename() != "latest") found.push_back(entry.path());
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? parent : found[0];
}

// The sweep's mechanics are tested on stories260K, the cheapest model (eval's own default is
// the retrieval model, tested in retrieval_model_test.cpp).
const std::string kStories = " -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf'";

const std::string kRulerSweep =
    "eval" + kStories + " --bench ruler --tasks niah_single_1,fwe --lengths 640 --press 'snapkv;deferkv:d=1,eta=0.7' "
    "--kv-budget 32,64 --samples 2 -t 2";

// A budget that covers the prompt makes the row the full cache: eval says so, once per row.
TEST(EvalCommand, ABudgetCoveringThePromptIsWarnedOnce) {
  gguf_test::TempDir dir;
  const auto r = testing::run_cli("eval" + kStories + " --tasks niah_single_1 --lengths 640 --press snapkv --kv-budget 2000 "
                                  "--samples 2 -t 2 -o '" + dir.path().string() + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string warning = "warning: snapkv@2000 at 640 tokens: the KV budget (2000 entries per head) is not smaller";
  const size_t first = r.output.find(warning);
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(warning, first + 1), std::string::npos) << r.output;
}

// KVzip repeats the context after it: eval's sessions hold that room too (a failed row
// would exit 1). Mutant tried: the session's context left at prompt + answer (the row fails:
// "do not fit in the context").
TEST(EvalCommand, KvzipGetsRoomForItsReconstruction) {
  gguf_test::TempDir dir;
  const auto r = testing::run_cli("eval" + kStories + " --tasks niah_single_1 --lengths 640 --press kvzip --kv-ratio 0.5 "
                                  "--question-agnostic --samples 1 -t 2 -o '" + dir.path().string() + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
}

TEST(EvalCommand, RulerSweepWritesEveryReportAndResumes) {
  gguf_test::TempDir dir;
  const std::string command = kRulerSweep + " -o '" + dir.path().string() + "' 2>&1";
  const testing::CliResult first = testing::run_cli(command);
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("[16/16] 100%"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("ETA"), std::string::npos);
  // The score table is printed at the end, as summary.md has it.
  EXPECT_NE(first.output.find("## 640 tokens (question-aware)\n\n| method | niah_single_1 | fwe | Avg. |"), std::string::npos)
      << first.output;
  const std::filesystem::path out = results_folder(dir.path());
  EXPECT_EQ(out.filename().string().rfind("ruler-stories260K-", 0), 0u) << out;
  for (const char* file : {"config.json", "samples.jsonl", "summary.md", "results.csv", "summary.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out / file)) << file;
  }
  // 2 presses x 2 budgets x 2 tasks x 2 samples.
  EXPECT_EQ(lines_of(out / "samples.jsonl"), 16u);
  const auto config = nlohmann::json::parse(read(out / "config.json"));
  EXPECT_EQ(config["model"]["sha256"], "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
  EXPECT_EQ(config["seed"], 42);
  EXPECT_EQ(config["n_batch"], 512);
  const auto& methods = config["sweep"]["methods"];
  ASSERT_EQ(methods.size(), 4u);
  EXPECT_EQ(methods[2]["label"], "deferkv:d=1,eta=0.7@32");
  EXPECT_EQ(methods[2]["description"].get<std::string>().rfind("deferkv:d=1,eta=0.7,", 0), 0u);
  EXPECT_EQ(methods[2]["params"].get<std::string>().rfind("deferkv:d=1,eta=0.7,", 0), 0u);
  EXPECT_EQ(std::filesystem::read_symlink(dir.path() / "latest"), out.filename());
  const auto summary = nlohmann::json::parse(read(out / "summary.json"));
  EXPECT_EQ(summary["run"]["git_commit"].get<std::string>().size() % 40, 0u);  // a commit, or "" outside git
  ASSERT_EQ(summary["tables"][0]["rows"].size(), 4u);
  EXPECT_EQ(summary["tables"][0]["columns"].dump(), R"(["niah_single_1","fwe"])");
  for (const auto& row : summary["tables"][0]["rows"]) {
    EXPECT_EQ(row["cost"]["samples"], 4);
    EXPECT_GT(row["cost"]["peak_kv_bytes"].get<int64_t>(), 0);
    // The prompts (~500 tokens) are longer than the budgets: every sample evicted.
    EXPECT_LT(row["cost"]["kv_bytes_after_eviction"].get<double>(), row["cost"]["peak_kv_bytes"].get<double>());
  }
  std::istringstream lines(read(out / "samples.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto r = nlohmann::json::parse(line);
    EXPECT_LE(r["prompt_tokens"].get<int64_t>() + (r["task"] == "fwe" ? 50 : 128), 640);
    EXPECT_LE(r["generated_tokens"].get<int64_t>(), r["task"] == "fwe" ? 50 : 128);
  }
  EXPECT_NE(read(out / "summary.md").find("| method | niah_single_1 | fwe | Avg. |"), std::string::npos);

  // The same command again: nothing left to run, nothing overwritten.
  const testing::CliResult again = testing::run_cli(command);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("resuming: 16 of 16 samples already done"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("0 samples run"), std::string::npos);
  EXPECT_EQ(lines_of(out / "samples.jsonl"), 16u);
  // A grown sweep (a third budget, a subset of the rest) goes to the same folder and runs its new rows only.
  const testing::CliResult grown = testing::run_cli(
      "eval" + kStories + " --bench ruler --tasks fwe --lengths 640 --press snapkv --kv-budget 32,48 --samples 1 -t 2 -o '" +
      dir.path().string() + "' 2>&1");
  ASSERT_EQ(grown.status, 0) << grown.output;
  EXPECT_NE(grown.output.find("resuming: 1 of 2 samples already done"), std::string::npos) << grown.output;
  EXPECT_EQ(results_folder(dir.path()), out);
  EXPECT_EQ(lines_of(out / "samples.jsonl"), 17u);
  // Its reports cover exactly that sweep.
  const auto grown_summary = nlohmann::json::parse(read(out / "summary.json"));
  ASSERT_EQ(grown_summary["tables"][0]["rows"].size(), 2u);
  EXPECT_EQ(grown_summary["tables"][0]["rows"][1]["label"], "snapkv@48");
  EXPECT_EQ(grown_summary["tables"][0]["columns"].dump(), R"(["fwe"])");
  // Another seed is another context: its own folder, named here, and `latest` follows.
  const testing::CliResult other = testing::run_cli("eval" + kStories +
                                                    " --tasks fwe --lengths 640 --samples 1 -t 2 -s 7 --name seed7 -o '" +
                                                    dir.path().string() + "' 2>&1");
  ASSERT_EQ(other.status, 0) << other.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "seed7" / "summary.md"));
  EXPECT_EQ(std::filesystem::read_symlink(dir.path() / "latest"), "seed7");
}

// The rows of a results folder's samples.jsonl by label, task and index: prediction and score.
std::map<std::string, std::string> predictions(const std::filesystem::path& log) {
  std::map<std::string, std::string> rows;
  std::istringstream lines(read(log));
  for (std::string line; std::getline(lines, line);) {
    const auto r = nlohmann::json::parse(line);
    rows[r["label"].get<std::string>() + " " + r["task"].get<std::string>() + " " + r["index"].dump()] =
        r["pred"].get<std::string>() + " | " + r["score"].dump();
  }
  return rows;
}

TEST(EvalCommand, TwoShardsMergedEqualTheUnshardedRun) {
  gguf_test::TempDir dir;
  const std::string sweep = "eval" + kStories + " --tasks niah_single_1,fwe --lengths 640 --press 'full;snapkv' "
                            "--kv-budget 32 --samples 2 -t 2 -o '" + dir.path().string() + "'";
  const testing::CliResult single = testing::run_cli(sweep + " --name single 2>&1");
  ASSERT_EQ(single.status, 0) << single.output;
  for (const char* shard : {"1/2", "2/2"}) {
    const testing::CliResult r = testing::run_cli(sweep + " --name sharded --shard " + shard + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("[4/4] 100%"), std::string::npos) << r.output;  // 8 rows, half each
    EXPECT_NE(r.output.find("deferkv eval merge"), std::string::npos) << r.output;
  }
  const std::filesystem::path sharded = dir.path() / "sharded", merged = dir.path() / "merged";
  EXPECT_EQ(lines_of(sharded / "samples.shard-1-of-2.jsonl"), 4u);
  EXPECT_FALSE(std::filesystem::exists(sharded / "summary.md"));  // a shard alone has no reports
  const testing::CliResult merge = testing::run_cli("eval merge '" + sharded.string() + "' -o '" + merged.string() + "' 2>&1");
  ASSERT_EQ(merge.status, 0) << merge.output;
  EXPECT_NE(merge.output.find("## 640 tokens (question-aware)\n\n| method | niah_single_1 | fwe | Avg. |"), std::string::npos) << merge.output;
  const auto single_rows = predictions(dir.path() / "single" / "samples.jsonl");
  EXPECT_EQ(single_rows.size(), 8u);
  EXPECT_EQ(predictions(merged / "samples.jsonl"), single_rows);
  for (const char* file : {"summary.md", "results.csv", "cost-bars.svg"}) EXPECT_TRUE(std::filesystem::exists(merged / file)) << file;
  const auto a = nlohmann::json::parse(read(dir.path() / "single" / "summary.json"));
  const auto b = nlohmann::json::parse(read(merged / "summary.json"));
  for (size_t row = 0; row < 2; ++row) {
    EXPECT_EQ(b["tables"][0]["rows"][row]["scores"], a["tables"][0]["rows"][row]["scores"]) << row;
    EXPECT_EQ(b["tables"][0]["rows"][row]["cost"]["samples"], 4) << row;
  }
  const testing::CliResult bad = testing::run_cli(sweep + " --shard 3/2 2>&1");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("--shard: '3/2' names no shard"), std::string::npos) << bad.output;
}

// A second run of the same sweep into the same folder while the first appends: refused, naming
// the folder and the first process; the first goes on alone, no line twice.
TEST(EvalCommand, ASecondRunIntoTheSameFolderIsRefused) {
  gguf_test::TempDir dir;
  const std::string out = dir.path().string();
  const std::string eval = std::string(DEFERKV_CLI) + " eval" + kStories + " --tasks niah_single_1 --lengths 640 " +
                           "--samples 400 -t 1 -o '" + out + "'";
  const auto r = testing::run_shell("( " + eval + " > /dev/null 2>&1 & pid=$!; " +
                                    "for i in $(seq 600); do [ -e '" + out + "'/latest/samples.jsonl.owner ] && break; sleep 0.1; done; " +
                                    eval + " 2>&1; echo \"second $?\"; kill -INT $pid; wait $pid )");
  EXPECT_NE(r.output.find("second 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is in use: another process (pid "), std::string::npos) << r.output;
  const std::filesystem::path folder = results_folder(dir.path());
  EXPECT_NE(r.output.find("'" + folder.string() + "' is in use"), std::string::npos) << r.output;
  std::set<std::string> indices;
  std::istringstream lines(read(folder / "samples.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(indices.insert(nlohmann::json::parse(line)["index"].dump()).second) << line;
  }
  EXPECT_FALSE(indices.empty());
}

// The question mode is part of the configuration: an agnostic sweep never reuses or joins
// the rows of an aware one (the same --name is refused, naming the field), and its reports
// say which mode ran.
TEST(EvalCommand, TheQuestionModeIsRecordedAndNeverMixed) {
  gguf_test::TempDir dir;
  const std::string sweep = "eval" + kStories + " --tasks niah_single_1 --lengths 640 --press snapkv --kv-budget 32 "
                            "--samples 1 -t 2 -o '" + dir.path().string() + "'";
  const testing::CliResult aware = testing::run_cli(sweep + " --name modes 2>&1");
  ASSERT_EQ(aware.status, 0) << aware.output;
  EXPECT_NE(aware.output.find("(question-aware)"), std::string::npos) << aware.output;
  const testing::CliResult mixed = testing::run_cli(sweep + " --name modes --question-agnostic 2>&1");
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.output.find("question_agnostic"), std::string::npos) << mixed.output;

  const testing::CliResult agnostic = testing::run_cli(sweep + " --question-agnostic 2>&1");
  ASSERT_EQ(agnostic.status, 0) << agnostic.output;
  EXPECT_EQ(agnostic.output.find("resuming"), std::string::npos) << agnostic.output;
  EXPECT_NE(agnostic.output.find("## 640 tokens (question-agnostic)\n\n| method | niah_single_1 | Avg. |"),
            std::string::npos)
      << agnostic.output;
  std::filesystem::path folder;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename() != "latest" && entry.path().filename() != "modes") folder = entry.path();
  }
  ASSERT_FALSE(folder.empty());
  EXPECT_EQ(nlohmann::json::parse(read(folder / "config.json"))["question_agnostic"], true);
  EXPECT_EQ(nlohmann::json::parse(read(dir.path() / "modes" / "config.json"))["question_agnostic"], false);
  EXPECT_EQ(nlohmann::json::parse(read(folder / "summary.json"))["question_agnostic"], true);
  EXPECT_NE(read(folder / "summary.md").find("- compression: question-agnostic"), std::string::npos);
  const std::string csv = read(folder / "results.csv");
  EXPECT_EQ(csv.rfind("label,method,kv_budget,kv_ratio,question_agnostic,task,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nsnapkv@32,snapkv,32,,true,niah_single_1,640,"), std::string::npos) << csv;
  EXPECT_NE(read(dir.path() / "modes" / "results.csv").find("\nsnapkv@32,snapkv,32,,false,"), std::string::npos);
}

TEST(EvalCommand, NiahGridWritesAHeatMapPerMethod) {
  gguf_test::TempDir dir;
  const testing::CliResult r = testing::run_cli("eval" + kStories + " --bench niah --lengths 300,600 --depths 0,50,100 "
                                                "--press full,snapkv --kv-budget 32 -t 2 -o '" +
                                                dir.path().string() + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::filesystem::path out = results_folder(dir.path());
  for (const char* file : {"summary.md", "results.csv", "summary.json", "niah-full.svg", "niah-snapkv@32.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(out / file)) << file;
  }
  EXPECT_EQ(lines_of(out / "samples.jsonl"), 12u);
  const auto summary = nlohmann::json::parse(read(out / "summary.json"));
  EXPECT_EQ(summary["niah_grids"][1]["label"], "snapkv@32");
  EXPECT_EQ(summary["niah_grids"][1]["depths"].dump(), "[0.0,50.0,100.0]");
  // Every NIAH answer stops at a newline or after 30 tokens.
  std::istringstream lines(read(out / "samples.jsonl"));
  for (std::string l; std::getline(lines, l);) {
    const auto s = nlohmann::json::parse(l);
    EXPECT_EQ(s["pred"].get<std::string>().find('\n'), std::string::npos);
    EXPECT_LE(s["generated_tokens"].get<int64_t>(), 30);
    EXPECT_LE(s["prompt_tokens"].get<int64_t>(), s["length"].get<int64_t>());
  }
}

// SpecKV is swept like any press once eval is given its draft model (here the model itself).
TEST(EvalCommand, SpecKvSweepsWithADraftModel) {
  gguf_test::TempDir dir;
  const std::string sweep = "eval" + kStories + " --bench niah --lengths 300 --depths 50 --press speckv:window=8 "
                            "--kv-budget 32 -t 2 -o '" + dir.path().string() + "'";
  const testing::CliResult without = testing::run_cli(sweep + " 2>&1");
  EXPECT_EQ(without.status, 1);
  EXPECT_NE(without.output.find("needs a draft model (--draft-model)"), std::string::npos) << without.output;
  std::filesystem::remove_all(dir.path());
  std::filesystem::create_directories(dir.path());
  const testing::CliResult r =
      testing::run_cli(sweep + " --draft-model '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::filesystem::path out = results_folder(dir.path());
  const auto config = nlohmann::json::parse(read(out / "config.json"));
  EXPECT_EQ(config["draft_model"]["sha256"], config["model"]["sha256"]);
  const auto sample = nlohmann::json::parse(read(out / "samples.jsonl"));
  EXPECT_LT(sample["kv_bytes_after_eviction"].get<double>(), sample["peak_kv_bytes"].get<double>()) << sample.dump();
}

TEST(EvalCommand, MissingQaFileAndBadOptionsAreClearErrors) {
  gguf_test::TempDir dir;
  const std::string o = " -o '" + dir.path().string() + "' 2>&1";
  const testing::CliResult qa =
      testing::run_cli("eval --tasks qa_1 --lengths 1k --squad /nonexistent/dev-v2.0.json --samples 1" + o);
  EXPECT_EQ(qa.status, 1);
  EXPECT_NE(qa.output.find("cannot read the SQuAD file '/nonexistent/dev-v2.0.json'"), std::string::npos) << qa.output;
  const testing::CliResult budget = testing::run_cli("eval --lengths 1k --press snapkv" + o);
  EXPECT_EQ(budget.status, 1);
  EXPECT_NE(budget.output.find("--press snapkv needs --kv-budget or --kv-ratio"), std::string::npos) << budget.output;
  const testing::CliResult length = testing::run_cli("eval --lengths 4x" + o);
  EXPECT_EQ(length.status, 1);
  EXPECT_NE(length.output.find("--lengths: '4x' is not a positive token count"), std::string::npos) << length.output;
}

}  // namespace
}  // namespace deferkv
