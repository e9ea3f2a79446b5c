// Conventions every command shares: --version, -v on either side of the subcommand, and
// Ctrl-C during a sweep leaving reports of what is done.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

using testing::run_cli;

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
