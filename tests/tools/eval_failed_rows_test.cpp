// A sweep with a configuration it cannot run: the rows it can run are written, the others
// are failed rows (failures.jsonl, "failed" in every report, exit status 1), and a rerun
// retries them. Mutant tried: keys_done reading the failures file too (the rerun then
// skips the failed rows and the retry check fails).
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/read_file.h"
#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

std::vector<nlohmann::json> json_lines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(testing::read_file(path.string()));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

const std::string kSweep = "eval -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' --tasks niah_single_1,fwe "
                           "--lengths 640 --press snapkv:window=32 --samples 2 -t 2";

TEST(EvalFailedRows, ABudgetBelowTheWindowFailsItsRowsAndTheRestRuns) {
  gguf_test::TempDir dir;
  const std::string command = kSweep + " --kv-budget 16,64 -o '" + dir.path().string() + "' 2>&1";
  const auto r = testing::run_cli(command);
  EXPECT_EQ(r.status, 1) << r.output;  // after writing everything
  EXPECT_NE(r.output.find("error: 4 row(s) failed"), std::string::npos) << r.output;
  // The error is shown once, with its fix, and the progress marks each failed row.
  const std::string error = "snapkv:window=32@16: the KV budget of 16 entries per head is smaller than the 32";
  ASSERT_NE(r.output.find(error), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(error, r.output.find(error) + 1), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("snapkv:window=32@16 fwe 640 #1 FAILED"), std::string::npos) << r.output;

  const std::filesystem::path out = dir.path() / "latest";
  const auto samples = json_lines(out / "samples.jsonl");
  ASSERT_EQ(samples.size(), 4u);
  for (const auto& s : samples) EXPECT_EQ(s["label"], "snapkv:window=32@64");
  const auto failures = json_lines(out / "failures.jsonl");
  ASSERT_EQ(failures.size(), 4u);
  for (const auto& f : failures) {
    EXPECT_EQ(f["label"], "snapkv:window=32@16");
    EXPECT_NE(f["error"].get<std::string>().find("raise the budget to at least 32"), std::string::npos);
  }
  // The reports: the row is there, failed, with its count and reason.
  const auto summary = nlohmann::json::parse(testing::read_file((out / "summary.json").string()));
  const auto& bad = summary["tables"][0]["rows"][0];
  EXPECT_EQ(bad["label"], "snapkv:window=32@16");
  EXPECT_EQ(bad["failed"].dump(), R"({"fwe":2,"niah_single_1":2})");
  EXPECT_EQ(bad["scores"]["fwe"], nullptr);
  EXPECT_NE(bad["error"].get<std::string>().find("smaller than the 32"), std::string::npos);
  EXPECT_EQ(summary["tables"][0]["rows"][1]["failed"].dump(), R"({"fwe":0,"niah_single_1":0})");
  const std::string md = testing::read_file((out / "summary.md").string());
  EXPECT_NE(md.find("| snapkv:window=32@16 | failed | failed | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("snapkv:window=32@16: 4 failed row(s): the KV budget of 16"), std::string::npos) << md;
  const std::string csv = testing::read_file((out / "results.csv").string());
  EXPECT_NE(csv.find(",failed,error\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("snapkv:window=32@16,snapkv:window=32,16,,false,fwe,640,,0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",2,\"the KV budget of 16"), std::string::npos) << csv;

  // A rerun retries the failed rows only (they fail again: still exit 1, four more lines).
  const auto again = testing::run_cli(command);
  EXPECT_EQ(again.status, 1) << again.output;
  EXPECT_NE(again.output.find("resuming: 4 of 8 samples already done"), std::string::npos) << again.output;
  EXPECT_EQ(json_lines(out / "failures.jsonl").size(), 8u);
  EXPECT_EQ(json_lines(out / "samples.jsonl").size(), 4u);
  // The same sweep without the bad budget reuses the folder's rows and succeeds.
  const auto good = testing::run_cli(kSweep + " --kv-budget 64 -o '" + dir.path().string() + "' 2>&1");
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("resuming: 4 of 4 samples already done"), std::string::npos) << good.output;
  EXPECT_EQ(nlohmann::json::parse(testing::read_file((out / "summary.json").string()))["tables"][0]["rows"][0]["error"],
            nullptr);
}

// A shard's exit status and count are its own failed rows, not the other shard's (the grid
// deals two of snapkv@16's rows to each; mutant tried: counting the whole folder's, which
// makes the second shard say 4).
TEST(EvalFailedRows, AShardCountsItsOwnFailedRows) {
  gguf_test::TempDir dir;
  for (int i = 1; i <= 2; ++i) {
    const auto r = testing::run_cli(kSweep + " --kv-budget 16,64 --name s --shard " + std::to_string(i) + "/2 -o '" +
                                    dir.path().string() + "' 2>&1");
    const std::filesystem::path own = dir.path() / "s" / ("failures.shard-" + std::to_string(i) + "-of-2.jsonl");
    const size_t failed = std::filesystem::exists(own) ? json_lines(own).size() : 0;
    EXPECT_EQ(r.status, failed > 0 ? 1 : 0) << r.output;
    if (failed > 0) EXPECT_NE(r.output.find(fmt::format("error: {} row(s) failed", failed)), std::string::npos) << r.output;
  }
  // Between them, the four rows of snapkv@16.
  size_t all = 0;
  for (int i = 1; i <= 2; ++i) {
    const std::filesystem::path f = dir.path() / "s" / ("failures.shard-" + std::to_string(i) + "-of-2.jsonl");
    if (std::filesystem::exists(f)) all += json_lines(f).size();
  }
  EXPECT_EQ(all, 4u);
}

// A press that no budget of the sweep can build is an error before anything runs.
TEST(EvalFailedRows, APressNoBudgetCanBuildIsAnErrorUpFront) {
  gguf_test::TempDir dir;
  const auto r = testing::run_cli(kSweep + " --kv-budget 8,16 -o '" + dir.path().string() + "' 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("raise the budget to at least 32"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace deferkv
