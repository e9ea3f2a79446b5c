// `deferkv eval --bench longbench` end to end on the embedded model: 2 presses x 2 budgets
// over two datasets the test writes give the LongBench table, records `deferkv score`
// reads, the score-vs-budget plot and the memory/latency bars.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tensor/gguf_test_util.h"
#include "support/read_file.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

std::string read(const std::filesystem::path& path) { return testing::read_file(path.string()); }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// Two rows per dataset, contexts of a few hundred tokens of story text.
void write_datasets(const std::filesystem::path& dir) {
  std::string story;
  for (int i = 0; i < 40; ++i) story += "Once upon a time, Lily saw a big red ball in the park. ";
  std::ofstream qa(dir / "multifieldqa_en.jsonl");
  std::ofstream trec(dir / "trec.jsonl");
  for (int i = 0; i < 2; ++i) {
    qa << nlohmann::json{{"input", "What did Lily see?"}, {"context", story}, {"answers", {"a big red ball"}},
                         {"length", 480}, {"dataset", "multifieldqa_en"}, {"language", "en"},
                         {"all_classes", nullptr}, {"_id", "qa" + std::to_string(i)}}
              .dump()
       << "\n";
    trec << nlohmann::json{{"input", "What is a ball?"}, {"context", story}, {"answers", {"Entity"}},
                           {"length", 480}, {"dataset", "trec"}, {"language", "en"},
                           {"all_classes", {"Entity", "Human being", "Location"}}, {"_id", "t" + std::to_string(i)}}
                .dump()
         << "\n";
  }
}

TEST(LongBenchSweep, TwoPressesTwoBudgetsGiveTheTableAndPlots) {
  gguf_test::TempDir dir;
  write_datasets(dir.path());
  const std::string out_parent = (dir.path() / "results").string();
  const testing::CliResult result = testing::run_cli(
      "eval -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' --bench longbench --longbench-dir '" +
      dir.path().string() + "' --tasks multifieldqa_en,trec --max-length 256 --press 'snapkv;deferkv:d=1,eta=0.7' --kv-budget 32,64 -t 2 -o '" +
      out_parent + "' 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("[16/16] 100%"), std::string::npos) << result.output;
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(out_parent)) {
    if (e.path().filename() != "latest") found.push_back(e.path());
  }
  ASSERT_EQ(found.size(), 1u);
  const std::filesystem::path out = found[0];
  EXPECT_EQ(out.filename().string().rfind("longbench-stories260K-", 0), 0u) << out;

  const auto config = nlohmann::json::parse(read(out / "config.json"));
  EXPECT_EQ(config["sweep"]["datasets"].dump(), R"(["multifieldqa_en","trec"])");
  EXPECT_EQ(config["sweep"]["max_length"]["trec"], 256);
  EXPECT_EQ(config["sweep"]["rows"].dump(), "[2,2]");
  EXPECT_EQ(config["sweep"]["samples"], "all");

  // 2 presses x 2 budgets x 2 datasets x 2 rows; the records hold what `deferkv score` reads.
  std::istringstream lines(read(out / "samples.jsonl"));
  int records = 0, evicted = 0;
  for (std::string line; std::getline(lines, line); ++records) {
    const auto r = nlohmann::json::parse(line);
    EXPECT_TRUE(r.contains("pred") && r.contains("answers") && r.contains("all_classes")) << line;
    // The ~600-token prompt was cut to 256 tokens (re-tokenizing the two halves may move it a little).
    EXPECT_NEAR(r["prompt_tokens"].get<double>(), 256.0, 6.0) << line;
    EXPECT_LE(r["generated_tokens"].get<int64_t>(), 64);
    // DeferKV evicts at the first decode step: not at all when generation ends before it.
    if (!r["kv_bytes_after_eviction"].is_null()) {
      EXPECT_LT(r["kv_bytes_after_eviction"].get<double>(), r["peak_kv_bytes"].get<double>());
      ++evicted;
    }
    if (r["dataset"] == "trec") EXPECT_EQ(r["all_classes"].size(), 3u);
  }
  EXPECT_EQ(records, 16);
  EXPECT_GE(evicted, 8);  // SnapKV evicts every sample at the end of prefill
  const testing::CliResult scored = testing::run_cli("score '" + (out / "samples.jsonl").string() + "' 2>&1");
  ASSERT_EQ(scored.status, 0) << scored.output;
  EXPECT_NE(scored.output.find("multifieldqa_en"), std::string::npos) << scored.output;

  const std::string md = read(out / "summary.md");
  EXPECT_NE(md.find("# LongBench results"), std::string::npos);
  EXPECT_NE(md.find("| method | multifieldqa_en | trec | Avg. |"), std::string::npos) << md;
  EXPECT_NE(md.find("| deferkv:d=1,eta=0.7@64 |"), std::string::npos) << md;
  const auto summary = nlohmann::json::parse(read(out / "summary.json"));
  EXPECT_EQ(summary["benchmark"], "longbench");
  ASSERT_EQ(summary["tables"][0]["rows"].size(), 4u);

  // One line (and legend entry) per press over the two budgets.
  const std::string plot = read(out / "score-vs-budget.svg");
  EXPECT_EQ(count_of(plot, "<polyline"), 2u) << plot;
  EXPECT_EQ(count_of(plot, "<circle"), 4u);
  EXPECT_NE(plot.find(">snapkv</text>"), std::string::npos);
  EXPECT_NE(plot.find(">deferkv:d=1,eta=0.7</text>"), std::string::npos);
  EXPECT_NE(plot.find(">32</text>"), std::string::npos);
  // Four panels of one bar per method.
  const std::string bars = read(out / "cost-bars.svg");
  EXPECT_EQ(count_of(bars, "<rect"), 1u + 4u * 4u);  // the background, then the bars
  EXPECT_NE(bars.find(">snapkv@32</text>"), std::string::npos);
  EXPECT_NE(bars.find("peak KV (MiB)"), std::string::npos);
  EXPECT_NE(md.find("![score vs budget](score-vs-budget.svg)"), std::string::npos);
}

TEST(LongBenchSweep, MissingDatasetFileIsAnErrorNamingIt) {
  gguf_test::TempDir dir;
  write_datasets(dir.path());
  const testing::CliResult result = testing::run_cli("eval --bench longbench --longbench-dir '" + dir.path().string() +
                                                     "' --tasks trec,hotpotqa -o '" + dir.path().string() + "' 2>&1");
  EXPECT_EQ(result.status, 1);  // an error, not a crash
  EXPECT_NE(result.output.find((dir.path() / "hotpotqa.jsonl").string() + "' does not exist"), std::string::npos)
      << result.output;
  const testing::CliResult no_dir = testing::run_cli("eval --bench longbench 2>&1");
  EXPECT_NE(no_dir.output.find("--longbench-dir"), std::string::npos) << no_dir.output;
}

}  // namespace
}  // namespace deferkv
