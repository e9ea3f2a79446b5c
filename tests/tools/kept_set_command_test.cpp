// Kept-set inspection end to end on the embedded model: generate --dump-kept against
// --stats-json and the summary line, and eval's kept-token map of a case worked out by hand.
// Mutant tried: the recorder taking the set only at the end of the prefill (DeferKV's
// decode_step and tokens then fail).
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/read_file.h"
#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

const std::string kPrompt =
    "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day she saw a big red ball under a tree.";

std::vector<nlohmann::json> json_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(testing::read_file(path));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// `generate` on kPrompt with `options`, its --stats-json and --dump-kept read back.
struct Generated {
  testing::CliResult result;  // stderr
  nlohmann::json stats;
  std::vector<nlohmann::json> dump;
};

Generated generate_with_dump(const std::string& options) {
  gguf_test::TempDir dir;
  const std::string dump = dir.file("kept.jsonl"), stats = dir.file("stats.json");
  Generated g{testing::run_cli("generate --temp 0 -p '" + kPrompt + "' " + options + " --dump-kept '" + dump +
                               "' --stats-json '" + stats + "' 2>&1 >/dev/null"),
              nullptr,
              {}};
  if (g.result.status != 0) return g;
  g.stats = nlohmann::json::parse(testing::read_file(stats));
  g.dump = json_lines(dump);
  return g;
}

TEST(KeptSetCommand, DumpKeptAgreesWithTheStatsAndKeepsSnapKvsWindow) {
  const auto [r, stats, lines] = generate_with_dump("-n 6 --press snapkv:window=8 --kv-budget 20");
  ASSERT_EQ(r.status, 0) << r.output;
  const int64_t prompt = stats["prompt_tokens"].get<int64_t>();
  ASSERT_GT(prompt, 30);
  const auto& kept = stats["kept"];
  EXPECT_EQ(kept["tokens"], prompt);  // taken at the end of the prefill, before the decoded tokens
  EXPECT_EQ(kept["decode_step"], 0);
  EXPECT_EQ(stats["budget"]["per_head"], 20);
  const int64_t n_layer = stats["kv"]["n_layer"].get<int64_t>(), n_head_kv = stats["kv"]["n_head_kv"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(lines.size()), n_layer * n_head_kv);
  for (const auto& line : lines) {
    const int64_t l = line["layer"].get<int64_t>(), h = line["kv_head"].get<int64_t>();
    const auto positions = line["positions"].get<std::vector<int64_t>>();
    EXPECT_EQ(line["kept"], positions.size());
    EXPECT_EQ(kept["layers"][l]["heads"][h]["kept"], positions.size()) << l << " " << h;
    EXPECT_EQ(positions.size(), 20u);
    EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
    EXPECT_EQ(std::adjacent_find(positions.begin(), positions.end()), positions.end());  // unique
    EXPECT_GE(positions.front(), 0);
    EXPECT_LT(positions.back(), prompt);
    // SnapKV's observation window, the prompt's last 8 positions, is always kept.
    for (int64_t p = prompt - 8; p < prompt; ++p) {
      EXPECT_TRUE(std::binary_search(positions.begin(), positions.end(), p)) << l << " " << h << " " << p;
    }
  }
  EXPECT_EQ(kept["layers"][0]["total"], prompt * n_head_kv);
  EXPECT_NEAR(kept["evicted_percent"].get<double>(), 100.0 * (1 - 20.0 / static_cast<double>(prompt)), 1e-9);
  const std::string line = fmt::format("kept 20 of {} entries per head on average ({:.1f}% evicted); per head min 20 max 20",
                                       prompt, 100.0 * (1 - 20.0 / static_cast<double>(prompt)));
  EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
  // The budget a ratio resolves to is printed too.
  const auto ratio = testing::run_cli("generate --temp 0 -n 2 -p '" + kPrompt + "' --press snapkv:window=8 --kv-ratio 0.5 2>&1 >/dev/null");
  ASSERT_EQ(ratio.status, 0) << ratio.output;
  EXPECT_NE(ratio.output.find(fmt::format("(ratio 0.5 = {} per head)", prompt / 2)), std::string::npos) << ratio.output;
  EXPECT_NE(ratio.output.find(fmt::format("kept {} of {} entries per head", prompt / 2, prompt)), std::string::npos);
}

// DeferKV evicts at decode step d: the kept set is the cache right after that step, with
// the d decoded tokens fed so far, not the cache after the prefill or at the end.
TEST(KeptSetCommand, ADeferredEvictionIsTakenAtItsDecodeStep) {
  const auto [r, stats, lines] = generate_with_dump("-n 12 --press deferkv:d=3,window=4 --kv-budget 10");
  ASSERT_EQ(r.status, 0) << r.output;
  const int64_t prompt = stats["prompt_tokens"].get<int64_t>();
  EXPECT_EQ(stats["kept"]["decode_step"], 3);
  EXPECT_EQ(stats["kept"]["tokens"], prompt + 3);
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) {
    EXPECT_EQ(line["decode_step"], 3);
    const auto positions = line["positions"].get<std::vector<int64_t>>();
    EXPECT_LT(positions.back(), prompt + 3);
    EXPECT_EQ(stats["kept"]["layers"][line["layer"].get<int64_t>()]["heads"][line["kv_head"].get<int64_t>()]["kept"],
              positions.size());
  }
}

TEST(KeptSetCommand, WithoutAPressEverythingIsKeptAndNoLineIsPrinted) {
  gguf_test::TempDir dir;
  const std::string dump = dir.file("kept.jsonl");
  const auto r = testing::run_cli("generate --temp 0 -n 2 -p 'Once upon a time' --dump-kept '" + dump + "' 2>&1 >/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("entries per head on average"), std::string::npos) << r.output;
  for (const auto& line : json_lines(dump)) {
    EXPECT_EQ(line["decode_step"], nullptr);
    const auto positions = line["positions"].get<std::vector<int64_t>>();
    ASSERT_EQ(static_cast<int64_t>(positions.size()), line["tokens"].get<int64_t>());
    for (size_t i = 0; i < positions.size(); ++i) EXPECT_EQ(positions[i], static_cast<int64_t>(i));
  }
}

// With a budget equal to SnapKV's window every head keeps exactly the prompt's last 8
// positions: each layer's row of the map has 8 cells, all fully dark, at those positions.
TEST(KeptSetCommand, EvalDrawsAKeptMapWithOneRowPerLayer) {
  gguf_test::TempDir dir;
  const auto r = testing::run_cli("eval -m '" DEFERKV_SOURCE_DIR "/models/stories260K.gguf' --tasks niah_single_1 "
                                  "--lengths 640 --press 'snapkv:window=8' --kv-budget 8 --samples 2 -t 2 -o '" +
                                  dir.path().string() + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::filesystem::path map = dir.path() / "latest" / "kept-snapkv_window=8@8.svg";
  ASSERT_TRUE(std::filesystem::exists(map)) << r.output;
  const std::string svg = testing::read_file(map.string());
  const int64_t prompt = json_lines((dir.path() / "latest" / "samples.jsonl").string()).at(0)["prompt_tokens"].get<int64_t>();
  EXPECT_NE(svg.find(fmt::format("niah_single_1 #0 at 640 tokens; kept 8 of {} entries", prompt)), std::string::npos);
  // The map's cells: rects 14 px high (the legend's are 12), grouped by row.
  std::map<std::string, std::vector<std::pair<double, std::string>>> rows;
  const std::regex rect(R"re(<rect x="([0-9.]+)" y="([0-9.]+)" width="[0-9.]+" height="14.0" fill="(#[0-9A-F]+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), rect), end; it != end; ++it) {
    rows[(*it)[2]].emplace_back(std::stod((*it)[1]), (*it)[3]);
  }
  ASSERT_EQ(rows.size(), 5u) << svg;  // stories260K's 5 layers
  for (const auto& [y, cells] : rows) {
    ASSERT_EQ(cells.size(), 8u) << y;
    for (const auto& [x, fill] : cells) EXPECT_EQ(fill, "#08306B");  // every head
    // The last 8 of `prompt` positions across the 800 px from x = 64.
    EXPECT_NEAR(cells.front().first, 64 + 800.0 * static_cast<double>(prompt - 8) / static_cast<double>(prompt), 0.11);
  }
  // One map per row, from its first sample; summary.md shows it.
  EXPECT_NE(testing::read_file((dir.path() / "latest" / "summary.md").string()).find("(kept-snapkv_window=8@8.svg)"),
            std::string::npos);
}

}  // namespace
}  // namespace deferkv
