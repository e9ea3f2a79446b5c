// Where a build finds its embedded models and data: $DEFERKV_HOME, then beside its own
// folder (the build tree), then <prefix>/share/deferkv (installed), then the source folder.
#include "base/resource_dir.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

void touch_models(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "models");
  std::ofstream(dir / "models" / "stories260K.gguf") << "x";
}

TEST(ResourceDir, HomeThenBuildTreeThenInstallPrefixThenSource) {
  gguf_test::TempDir dir;
  const std::filesystem::path root = dir.path();
  const std::string exe = (root / "prefix" / "bin" / "deferkv").string();
  EXPECT_EQ(resource_dir_for(exe, std::nullopt, "/src"), "/src");
  touch_models(root / "prefix" / "share" / "deferkv");
  EXPECT_EQ(resource_dir_for(exe, std::nullopt, "/src"), (root / "prefix" / "share" / "deferkv").string());
  touch_models(root / "prefix");  // a build tree: <checkout>/build/deferkv beside <checkout>/models
  EXPECT_EQ(resource_dir_for(exe, std::nullopt, "/src"), (root / "prefix").string());
  EXPECT_EQ(resource_dir_for(exe, std::string("/home/me/deferkv"), "/src"), "/home/me/deferkv");
  EXPECT_EQ(resource_dir_for(exe, std::string(""), "/src"), (root / "prefix").string());  // empty: unset
}

// The CLI copied into an install layout of its own finds the models there, not in the
// checkout: with the models removed from that layout, the default model is missing there.
TEST(ResourceDir, AMovedCliFindsItsModelsBesideIt) {
  gguf_test::TempDir dir;
  const std::filesystem::path prefix = dir.path() / "prefix";
  std::filesystem::create_directories(prefix / "bin");
  std::filesystem::copy_file(DEFERKV_CLI, prefix / "bin" / "deferkv");
  const std::filesystem::path share = prefix / "share" / "deferkv";
  std::filesystem::create_directories(share / "models");
  std::filesystem::copy_file(std::string(DEFERKV_SOURCE_DIR) + "/models/stories260K.gguf",
                             share / "models" / "stories260K.gguf");
  const std::string cli = "env -u DEFERKV_HOME '" + (prefix / "bin" / "deferkv").string() + "'";
  const auto ok = testing::run_shell(cli + " generate -n 4 -p hi 2>&1");
  EXPECT_EQ(ok.status, 0) << ok.output;
  // Its eval default (the retrieval model) was not copied: the error names the install's path.
  const auto missing = testing::run_shell(cli + " eval --lengths 1k --samples 1 -o '" + dir.file("out") + "' 2>&1");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find((share / "models" / "deferkv-retrieval-5m.gguf").string()), std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace deferkv
