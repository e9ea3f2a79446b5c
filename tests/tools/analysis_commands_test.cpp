// `deferkv analyze consistency` and `deferkv calibrate compresskv`, run as the built CLI.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/read_file.h"
#include "tools/cli_runner.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

using testing::run_cli;

TEST(AnalyzeCommand, ConsistencyAsJson) {
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "Lily went to the park with her mom and saw a big red ball. ";
  gguf_test::TempDir dir;  // fresh, so no earlier run's file can stand in for this one's
  const std::string svg = dir.file("consistency.svg");
  const auto r = run_cli("analyze consistency -p '" + prompt +
                         "' --kv-budget 48 --window 16 --prompt-probes 2 --decode-probes 2 --reference-steps 6 --format json --svg '" +
                         svg + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string figure = testing::read_file(svg);
  EXPECT_NE(figure.find("<svg xmlns"), std::string::npos) << figure.substr(0, 80);
  for (const char* label : {"JSD similarity", "top-B recall", "window", "deferkv", "+1", "-2"}) {
    EXPECT_NE(figure.find(label), std::string::npos) << label;
  }
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["points"].size(), 2u + 2u + 2u);
  EXPECT_EQ(j["points"][2]["probe"], "+1");
  EXPECT_EQ(j["reference_rows"], 6);
}

TEST(AnalyzeCommand, TooShortPromptIsAClearError) {
  const auto r = run_cli("analyze consistency -p 'Hi there' 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("is too short for a window of 32"), std::string::npos) << r.output;
}

TEST(CalibrateCommand, NonRetrievingModelWritesNothing) {
  gguf_test::TempDir dir;
  const std::string path = dir.file("never-written.json");
  const auto r = run_cli("calibrate compresskv -o '" + path + "' --lengths 300 --depths 50 2>&1; test -e '" + path +
                         "' && echo EXISTS");
  EXPECT_NE(r.output.find("none of the 1 probes was answered"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("EXISTS"), std::string::npos);
}

}  // namespace
}  // namespace deferkv
