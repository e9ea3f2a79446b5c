// The end-to-end check: `deferkv generate -m` on a 2-layer model whose block_count
// says 8,192,001 peaked at 3.5 GB of resident memory before it reported a missing tensor.
// Now it is refused by name, at the resident peak of the same model loaded and run for one
// token, plus a few MB.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/test_models.h"
#include "tensor/gguf_test_util.h"
#include "untrusted/crafted_models.h"

extern char** environ;

namespace deferkv {
namespace {

struct CliRun {
  int status = -1;
  int64_t peak_rss_kib = 0;
  std::string stderr_text;
};

// Runs the CLI with `args`, its standard error to `log`, and reads the child's resident peak
// from wait4 (the test's own memory is not in it).
CliRun run_cli(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv_text = {DEFERKV_CLI};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  CliRun run;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return run;
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return run;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.peak_rss_kib = usage.ru_maxrss;
  std::ifstream in(log);
  run.stderr_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

TEST(UntrustedFilesCli, LayerCountBeyondTheTensorsIsRefusedAtASmallModelsPeak) {
  const gguf_test::TempDir dir;
  const RandomModelSpec spec = testing::two_layer_spec();
  const std::string normal = testing::random_model_path(spec);
  const std::string patched =
      testing::model_with_u32(spec, "llama.block_count", 8192001, dir.file("block-count-8192001.gguf"));
  const CliRun good = run_cli({"generate", "-m", normal, "-p", "Once", "-n", "1", "-t", "1"}, dir.file("good.log"));
  ASSERT_EQ(good.status, 0) << good.stderr_text;
  const CliRun bad = run_cli({"generate", "-m", patched, "-p", "Once", "-n", "1", "-t", "1"}, dir.file("bad.log"));
  EXPECT_EQ(bad.status, 1) << bad.stderr_text;
  EXPECT_NE(bad.stderr_text.find("llama.block_count"), std::string::npos) << bad.stderr_text;
  EXPECT_NE(bad.stderr_text.find(patched), std::string::npos) << bad.stderr_text;
  EXPECT_LE(bad.peak_rss_kib, good.peak_rss_kib + 8 * 1024)
      << "refusing the file peaked at " << bad.peak_rss_kib << " KiB, running the model at " << good.peak_rss_kib;
}

}  // namespace
}  // namespace deferkv
