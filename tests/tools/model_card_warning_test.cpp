// `deferkv eval` warns, before the first sample, when the embedded retrieval model's card
// does not cover the benchmark (NIAH, LongBench), and only then.
// Mutant tried: eval not calling warn_if_card_does_not_cover fails WarnsBeforeANiahSweep.
#include <string>

#include <gtest/gtest.h>

#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

const std::string kWarning = "warning: the embedded retrieval model was trained on RULER's wording only";

TEST(ModelCardWarning, WarnsBeforeANiahSweepOnTheRetrievalModel) {
  gguf_test::TempDir dir;
  const testing::CliResult r =
      testing::run_cli("eval --bench niah --lengths 512 --depths 50 -o '" + dir.path().string() + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t warning = r.output.find(kWarning + ", not on NIAH's question");
  ASSERT_NE(warning, std::string::npos) << r.output;
  EXPECT_LT(warning, r.output.find("[1/1]")) << r.output;  // before the sample runs
  EXPECT_NE(r.output.find("models/README.md"), std::string::npos);
}

TEST(ModelCardWarning, SaysNothingForRulerOrAnotherModel) {
  gguf_test::TempDir dir;
  const testing::CliResult ruler = testing::run_cli("eval --tasks niah_single_1 --lengths 512 --samples 1 -o '" +
                                                    dir.path().string() + "' 2>&1");
  ASSERT_EQ(ruler.status, 0) << ruler.output;
  EXPECT_EQ(ruler.output.find("warning: the embedded"), std::string::npos) << ruler.output;
  const testing::CliResult stories = testing::run_cli("eval -m '" DEFERKV_SOURCE_DIR
                                                      "/models/stories260K.gguf' --bench niah --lengths 300 --depths 50 "
                                                      "-o '" + dir.path().string() + "' 2>&1");
  ASSERT_EQ(stories.status, 0) << stories.output;
  EXPECT_EQ(stories.output.find("warning: the embedded"), std::string::npos) << stories.output;
}

}  // namespace
}  // namespace deferkv
