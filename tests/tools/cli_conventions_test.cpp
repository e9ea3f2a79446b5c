// Conventions every command shares: one meaning per flag name (checked on every command's
// --help against a table), --version, -v on either side of the subcommand, llama.cpp's
// prompt escapes, and Ctrl-C during a sweep leaving reports of what is done.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

using testing::run_cli;

const std::vector<std::string> kCommands = {
    "generate", "tokenize", "inspect", "bench", "make-model", "make-lookahead-weights", "make-data", "import-weights",
    "presses", "bench-press", "analyze consistency", "calibrate compresskv", "score", "eval", "eval merge"};

// Each short flag's one long name. llama-bench's -p/-n (prompt and generation sizes) hold in
// the two benchmark commands, as in llama.cpp.
std::string long_name_of(const std::string& command, const std::string& short_flag) {
  const bool bench = command == "bench" || command == "bench-press";
  static const std::map<std::string, std::string> kTable = {
      {"-m", "--model"}, {"-t", "--threads"}, {"-o", "--output"}, {"-c", "--ctx-size"}, {"-b", "--batch-size"},
      {"-f", "--file"},  {"-s", "--seed"},    {"-r", "--repetitions"}, {"-d", "--n-depth"}, {"-h", "--help"}};
  if (short_flag == "-p") return bench ? "--n-prompt" : "--prompt";
  if (short_flag == "-n") return bench ? "--n-gen" : "--n-predict";
  const auto it = kTable.find(short_flag);
  return it == kTable.end() ? "" : it->second;
}

// The flags of a command's --help: "-m,--model" → {"-m", "--model"}; "--press" → {"", "--press"}.
std::vector<std::pair<std::string, std::string>> flags_of(const std::string& command) {
  const auto help = run_cli(command + " --help 2>&1");
  EXPECT_EQ(help.status, 0) << command << ": " << help.output;
  std::vector<std::pair<std::string, std::string>> flags;
  std::istringstream lines(help.output);
  const std::regex flag(R"(^\s+(-[A-Za-z])?,?(--[a-z0-9-]+)?)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, flag) && (m[1].matched || m[2].matched)) flags.emplace_back(m[1], m[2]);
  }
  return flags;
}

TEST(CliConventions, EveryCommandsFlagsFollowTheTable) {
  for (const std::string& command : kCommands) {
    const auto flags = flags_of(command);
    ASSERT_GE(flags.size(), 2u) << command;  // at least -h,--help and --help-all
    std::set<std::string> names;
    for (const auto& [short_flag, long_flag] : flags) {
      names.insert(long_flag);
      if (short_flag.empty()) continue;
      EXPECT_EQ(long_flag, long_name_of(command, short_flag)) << command << " " << short_flag;
    }
    // Budgets are --kv-budget / --kv-ratio wherever a press is chosen; a bare --budget is not a flag.
    if (names.contains("--press")) {
      EXPECT_TRUE(names.contains("--kv-budget")) << command;
      EXPECT_TRUE(names.contains("--kv-ratio")) << command;
    }
    EXPECT_FALSE(names.contains("--budget")) << command;
    // A report's format is --format; -o is then the file it goes to.
    if (names.contains("--format")) EXPECT_TRUE(names.contains("--output")) << command;
  }
}

TEST(CliConventions, OutputNamesAFileAndFormatTheFormat) {
  gguf_test::TempDir dir;
  const std::string bench = "bench -p 8 -n 0 -t 1 -r 1";
  const auto wrong = run_cli(bench + " -o json 2>&1");
  EXPECT_EQ(wrong.status, 1);
  EXPECT_EQ(wrong.output, "error: -o names the output file; for the json format give --format json\n");
  const auto to_file = run_cli(bench + " --format json -o '" + dir.file("b.json") + "' 2>&1");
  ASSERT_EQ(to_file.status, 0) << to_file.output;
  std::ifstream in(dir.file("b.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"test\": \"pp8\""), std::string::npos) << text;
}

// -p 'a\nb' is a newline, as llama.cpp reads it; --no-escape keeps the backslash.
TEST(CliConventions, PromptEscapesAsLlamaCpp) {
  gguf_test::TempDir dir;
  std::ofstream(dir.file("p.txt"), std::ios::binary) << "Once\nupon\ta \"time\"\x41";
  const auto from_file = run_cli("tokenize --ids -f '" + dir.file("p.txt") + "' 2>&1");
  const auto escaped = run_cli(R"(tokenize --ids -p 'Once\nupon\ta \"time\"\x41' 2>&1)");
  ASSERT_EQ(escaped.status, 0) << escaped.output;
  EXPECT_EQ(escaped.output, from_file.output);
  const auto raw = run_cli(R"(tokenize --ids --no-escape -p 'Once\nupon' 2>&1)");
  EXPECT_NE(raw.output, run_cli(R"(tokenize --ids -p 'Once\nupon' 2>&1)").output);
}

TEST(CliConventions, InspectTakesTheFileAsAnArgument) {
  const std::string model = DEFERKV_SOURCE_DIR "/models/stories260K.gguf";
  const auto positional = run_cli("inspect '" + model + "' --json 2>&1");
  ASSERT_EQ(positional.status, 0) << positional.output;
  EXPECT_EQ(positional.output, run_cli("inspect -m '" + model + "' --json 2>&1").output);
  EXPECT_EQ(run_cli("inspect '" + model + "' -m '" + model + "' 2>&1").output,
            "error: give the file once: as an argument or with -m\n");
}

TEST(CliConventions, VersionNamesTheReleaseAndCommit) {
  const auto r = run_cli("--version 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("deferkv 0.1.0 (git ", 0), 0u) << r.output;
}

TEST(CliConventions, VerboseIsTakenBeforeOrAfterTheSubcommand) {
  EXPECT_EQ(run_cli("-v generate -n 1 -p hi >/dev/null 2>&1").status, 0);
  EXPECT_EQ(run_cli("generate -n 1 -p hi -v >/dev/null 2>&1").status, 0);
}

// SIGINT once the first sample is logged: the sweep stops after the sample in flight,
// writes the reports of what is done, prints the table and exits 130.
TEST(CliConventions, InterruptedEvalWritesTheReportsOfWhatIsDone) {
  gguf_test::TempDir dir;
  const std::string out = dir.path().string();
  const std::string eval = "eval -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' --tasks niah_single_1 "
                           "--lengths 640 --samples 400 -t 1 -o '" + out + "'";
  const std::string script = "( " + std::string(DEFERKV_CLI) + " " + eval + " > '" + out + "/stdout' 2>&1 & pid=$!; " +
                             "for i in $(seq 600); do kill -0 $pid 2>/dev/null || break; [ -s '" + out + "'/ruler-*/samples.jsonl ] && break; sleep 0.1; done; " +
                             "kill -INT $pid; wait $pid; echo \"status $?\"; cat '" + out + "/stdout' )";
  const auto r = testing::run_shell(script);
  EXPECT_NE(r.output.find("status 130"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("interrupted: writing the reports"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| method | niah_single_1 | Avg. |"), std::string::npos) << r.output;
  bool summary = false;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    summary = summary || std::filesystem::exists(entry.path() / "summary.md");
  }
  EXPECT_TRUE(summary);
}

}  // namespace
}  // namespace deferkv
