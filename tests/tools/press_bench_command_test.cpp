// `deferkv bench-press` end to end on a small random model: a row per press with the
// KV cache shrunk by the compressing ones, SpecKV fed by --draft-model, and the decode
// speed per window of steps.
#include <gtest/gtest.h>

#include <sstream>

#include "model/test_models.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

// The cells of the markdown row that starts with "| <first> | <second> |".
std::vector<std::string> row_cells(const std::string& output, const std::string& start) {
  const size_t at = output.find("\n" + start);
  if (at == std::string::npos) return {};
  const std::string line = output.substr(at + 1, output.find('\n', at + 1) - at - 1);
  std::vector<std::string> cells;
  std::istringstream parts(line);
  for (std::string cell; std::getline(parts, cell, '|');) {
    const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    if (b != std::string::npos) cells.push_back(cell.substr(b, e - b + 1));
  }
  return cells;
}

TEST(PressBenchCommand, ComparesPressesAndReportsDecodeWindows) {
  RandomModelSpec spec;
  spec.n_embd = 64, spec.n_layer = 2, spec.n_head = 4, spec.n_head_kv = 2, spec.n_ff = 128;
  const std::string model = testing::random_model_path(spec);
  const auto result = testing::run_cli("bench-press -m '" + model + "' --draft-model '" + model +
                                       "' -p 96 --press 'full;snapkv:window=8;speckv:window=8,n_draft=4;"
                                       "snapkv:window=8+moment_kv:decode_budget=8' --kv-budget 32 -n 24 "
                                       "--short-context 48 -r 1 --decode-windows 8 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto full = row_cells(result.output, "| 96 | full |");
  const auto snap = row_cells(result.output, "| 96 | snapkv:window=8 |");
  const auto spec_row = row_cells(result.output, "| 96 | speckv:window=8,n_draft=4 |");
  ASSERT_EQ(full.size(), 13u) << result.output;
  ASSERT_EQ(snap.size(), 13u);
  ASSERT_EQ(spec_row.size(), 13u);
  // KV MiB after eviction (column 12): 32 of 96 prompt entries (+ decode tokens) remain.
  EXPECT_LT(std::stod(snap[11]), 0.5 * std::stod(full[11]));
  EXPECT_EQ(snap[10], "1.000");  // SnapKV is the end-to-end reference
  // The per-window table: three windows of 8 steps, and the ratio of the last to the first.
  EXPECT_NE(result.output.find("| press | 1-8 | 9-16 | 17-24 | last / first |"), std::string::npos) << result.output;
  const auto moment = row_cells(result.output, "| snapkv:window=8+moment_kv:decode_budget=8 |");
  ASSERT_EQ(moment.size(), 5u) << result.output;
  for (size_t w = 1; w < 4; ++w) EXPECT_GT(std::stod(moment[w]), 0.0);
}

TEST(PressBenchCommand, SpecKvWithoutADraftModelIsAClearError) {
  RandomModelSpec spec;
  spec.n_embd = 64, spec.n_layer = 2, spec.n_head = 4, spec.n_head_kv = 2, spec.n_ff = 128;
  const auto result = testing::run_cli("bench-press -m '" + testing::random_model_path(spec) +
                                       "' -p 64 --press speckv --kv-budget 16 -n 4 --short-context 32 -r 1 2>&1");
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.output.find("draft"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace deferkv
