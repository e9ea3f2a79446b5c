// `deferkv score`, run as the built CLI on predictions files it writes.
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

using testing::CliResult;

std::string write_file(const gguf_test::TempDir& dir, const std::string& text) {
  const std::string path = dir.file("pred.jsonl");
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::string kLongBench =
    R"({"dataset": "gov_report", "pred": "the cat sat.", "answers": ["the cat sat."], "all_classes": null})"
    "\n"
    R"({"dataset": "lcc", "pred": "# c\nx = 1\r\n", "answers": ["x = 1"], "all_classes": null})"
    "\n";

TEST(ScoreCommand, PrintsPerDatasetScoresAndAverageAsJson) {
  gguf_test::TempDir dir;
  const CliResult r = testing::run_cli("score '" + write_file(dir, kLongBench) + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto out = nlohmann::ordered_json::parse(r.output);
  EXPECT_EQ(out["benchmark"], "longbench");
  ASSERT_EQ(out["rows"].size(), 1u);
  const auto& row = out["rows"][0];
  EXPECT_TRUE(row["label"].is_null());
  // rouge-L of identical texts is 0.999999995 → 100.0; code_sim of "x = 1\r" is 91.
  EXPECT_EQ(row["scores"].dump(), R"({"gov_report":100.0,"lcc":91.0})");
  EXPECT_EQ(row["samples"].dump(), R"({"gov_report":1,"lcc":1})");
  EXPECT_EQ(row["average"], 95.5);
}

TEST(ScoreCommand, MarkdownAndExplicitBenchmark) {
  gguf_test::TempDir dir;
  const std::string path = write_file(dir, R"({"task": "vt", "pred": "X Y", "outputs": ["x", "z"]})");
  const CliResult r = testing::run_cli("score '" + path + "' --benchmark ruler --format md 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "| vt | Avg. |\n| ---: | ---: |\n| 50.00 | 50.00 |\n");
}

// eval's samples.jsonl: a row per method label (the README's main job once printed one
// pooled niah_single_1 score over all four methods), written to a file with -o.
TEST(ScoreCommand, ASweepsSamplesAreScoredOneRowPerMethod) {
  gguf_test::TempDir dir;
  const std::string line = R"("length": 4096, "task": "niah_single_1", "outputs": ["1234567"], "pred": )";
  const std::string path = write_file(dir, R"({"label": "full", )" + line + R"("1234567"})" + "\n" +
                                               R"({"label": "snapkv@64", )" + line + R"("7"})" + "\n");
  const std::string out = dir.file("scores.md");
  const CliResult r = testing::run_cli("score '" + path + "' --format md -o '" + out + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "");
  std::ifstream in(out);
  const std::string table((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(table,
            "| method | length | niah_single_1 | Avg. |\n| --- | ---: | ---: | ---: |\n"
            "| full | 4096 | 100.00 | 100.00 |\n| snapkv@64 | 4096 | 0.00 | 0.00 |\n");
}

TEST(ScoreCommand, BadInputIsAClearErrorAndExitStatus1) {
  gguf_test::TempDir dir;
  const std::string path = write_file(dir, kLongBench + R"({"dataset": "gov_report", "pred": "x"})" + "\n");
  const CliResult missing = testing::run_cli("score '" + path + "' 2>&1");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.output, "error: " + path + ":3: missing field 'answers'\n");

  const std::string broken = write_file(dir, "not json\n");
  const CliResult invalid = testing::run_cli("score '" + broken + "' 2>&1");
  EXPECT_EQ(invalid.status, 1);
  EXPECT_NE(invalid.output.find("error: " + broken + ":1: invalid JSON"), std::string::npos) << invalid.output;

  const CliResult format = testing::run_cli("score '" + path + "' --format csv 2>&1");
  EXPECT_EQ(format.status, 1);
  EXPECT_EQ(format.output, "error: --format must be one of json, md, got 'csv'\n");
  EXPECT_EQ(testing::run_cli("score '" + path + "' --benchmark mmlu 2>&1").status, 1);
  EXPECT_EQ(testing::run_cli("score /no/such/file.jsonl 2>&1").output, "error: cannot read '/no/such/file.jsonl'\n");
}

}  // namespace
}  // namespace deferkv
