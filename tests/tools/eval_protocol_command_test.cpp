// `deferkv eval --protocol kvpress` end to end on stories260K, the cheapest model, at one
// task, 640 tokens and one sample: the leaderboard holds every press at every ratio in both
// question modes where the protocol has them, the plot a line each and the full cache's
// ceiling; the same command again runs no row; bad presses, ratios and protocols are refused
// by name before anything runs.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/read_file.h"
#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

std::string read(const std::filesystem::path& path) { return testing::read_file(path.string()); }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

const std::string kProtocol = "eval --protocol kvpress -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' "
                              "--tasks niah_single_1 --lengths 640 --samples 1 -t 2";

TEST(EvalProtocolCommand, KvpressLeaderboardHasEveryCellAndResumes) {
  gguf_test::TempDir dir;
  const std::string command = kProtocol + " --press 'knorm;snapkv' -o '" + dir.path().string() + "' 2>&1";
  const testing::CliResult first = testing::run_cli(command);
  ASSERT_EQ(first.status, 0) << first.output;
  const std::filesystem::path out = dir.path() / "kvpress-stories260K";
  // The table, printed and in leaderboard.md: knorm question-agnostic only, snapkv in both modes.
  const std::string md = read(out / "leaderboard.md");
  EXPECT_NE(first.output.find("| press | question | 0.25 | 0.5 | 0.75 | 0.875 | Avg. |"), std::string::npos) << first.output;
  EXPECT_NE(md.find("| full cache (ceiling) | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("| knorm | question-agnostic |"), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | question-agnostic |"), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | question-aware |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| knorm | question-aware |"), std::string::npos) << md;

  const auto board = nlohmann::json::parse(read(out / "leaderboard.json"));
  EXPECT_EQ(board["protocol"], "kvpress");
  EXPECT_EQ(board["ratios"].dump(), "[0.25,0.5,0.75,0.875]");
  EXPECT_EQ(board["tasks"].dump(), R"(["niah_single_1"])");
  EXPECT_TRUE(board["full"].is_number());
  ASSERT_EQ(board["lines"].size(), 3u);
  const std::vector<std::pair<std::string, bool>> lines = {{"knorm", true}, {"snapkv", true}, {"snapkv", false}};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& line = board["lines"][i];
    EXPECT_EQ(line["press"], lines[i].first);
    EXPECT_EQ(line["question_agnostic"], lines[i].second);
    for (const char* ratio : {"0.25", "0.5", "0.75", "0.875"}) EXPECT_TRUE(line["scores"][ratio].is_number()) << ratio;
  }
  EXPECT_EQ(count_of(read(out / "leaderboard.csv"), "\n"), 1u + 1u + 3u * 4u);

  // The plot: three lines and the ceiling, each with its legend swatch.
  const std::string svg = read(out / "leaderboard.svg");
  EXPECT_EQ(count_of(svg, "<polyline"), 8u);
  EXPECT_EQ(count_of(svg, "<circle"), 12u);  // a point per press, mode and ratio
  EXPECT_NE(svg.find(">full cache (ceiling)<"), std::string::npos);
  EXPECT_NE(svg.find(">snapkv (question-aware)<"), std::string::npos);

  // The two sweeps: question-agnostic with the full cache (1 + 2 presses x 4 ratios rows),
  // question-aware with snapkv's 4.
  const auto agnostic = out / board["sweeps"]["question_agnostic"].get<std::string>();
  const auto aware = out / board["sweeps"]["question_aware"].get<std::string>();
  EXPECT_EQ(count_of(read(agnostic / "samples.jsonl"), "\n"), 9u);
  EXPECT_EQ(count_of(read(aware / "samples.jsonl"), "\n"), 4u);
  EXPECT_EQ(nlohmann::json::parse(read(agnostic / "config.json"))["question_agnostic"], true);
  EXPECT_EQ(nlohmann::json::parse(read(aware / "config.json"))["question_agnostic"], false);

  // The same command again: nothing to run, the same leaderboard.
  const testing::CliResult again = testing::run_cli(command);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("resuming: 9 of 9 samples already done"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("resuming: 4 of 4 samples already done"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("\n0 samples run; leaderboard in"), std::string::npos) << again.output;
  EXPECT_EQ(count_of(read(agnostic / "samples.jsonl"), "\n"), 9u);
  EXPECT_EQ(count_of(read(aware / "samples.jsonl"), "\n"), 4u);
  EXPECT_EQ(read(out / "leaderboard.md"), md);
}

TEST(EvalProtocolCommand, BadPressRatioOrProtocolIsRefusedByName) {
  gguf_test::TempDir dir;
  const std::string to = " -o '" + dir.path().string() + "' 2>&1";
  const testing::CliResult press = testing::run_cli(kProtocol + " --press 'knorm;nosuchpress'" + to);
  EXPECT_NE(press.status, 0);
  EXPECT_NE(press.output.find("unknown press 'nosuchpress'"), std::string::npos) << press.output;
  for (const char* ratio : {"1", "1.5"}) {
    const testing::CliResult r = testing::run_cli(kProtocol + " --press knorm --kv-ratio 0.5," + ratio + to);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find(std::string("--kv-ratio: ") + ratio + " is not a compression ratio in [0, 1)"),
              std::string::npos)
        << r.output;
  }
  const testing::CliResult protocol = testing::run_cli(
      "eval --protocol nosuchprotocol -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf'" + to);
  EXPECT_NE(protocol.status, 0);
  EXPECT_NE(protocol.output.find("unknown protocol 'nosuchprotocol' (known: kvpress)"), std::string::npos)
      << protocol.output;
  const testing::CliResult budget = testing::run_cli(kProtocol + " --press knorm --kv-budget 64" + to);
  EXPECT_NE(budget.status, 0);
  EXPECT_NE(budget.output.find("not --kv-budget"), std::string::npos) << budget.output;
  // Nothing ran: no results folder was made.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace deferkv
