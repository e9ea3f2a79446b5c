// `deferkv bench-press` end to end on a small random model: a row per press with the
// KV cache shrunk by the compressing ones, SpecKV fed by --draft-model, KVzip's
// reconstruction given room in the context, and the decode speed per window of steps.
#include <gtest/gtest.h>

#include <sstream>

#include <fmt/format.h>

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
                                       "snapkv:window=8+moment_kv:decode_budget=8;kvzip' --kv-budget 32 -n 24 "
                                       "--short-context 48 -r 1 --decode-windows 8 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto full = row_cells(result.output, "| 96 | full | - |");
  const auto snap = row_cells(result.output, "| 96 | snapkv:window=8 | 32 |");
  const auto spec_row = row_cells(result.output, "| 96 | speckv:window=8,n_draft=4 | 32 |");
  ASSERT_EQ(full.size(), 17u) << result.output;
  ASSERT_EQ(snap.size(), 17u);
  ASSERT_EQ(spec_row.size(), 17u);
  // KV MiB after eviction (column 13): 32 of 96 prompt entries (+ decode tokens) remain.
  EXPECT_LT(std::stod(snap[12]), 0.5 * std::stod(full[12]));
  // KVzip's reconstruction runs after the prompt: the session's context makes room for it
  // (mutant tried: the context left at prompt + generation; the prefill is refused).
  const auto kvzip = row_cells(result.output, "| 96 | kvzip | 32 |");
  ASSERT_EQ(kvzip.size(), 17u) << result.output;
  EXPECT_LT(std::stod(kvzip[12]), 0.5 * std::stod(full[12]));
  EXPECT_EQ(snap[11], "1.000");  // SnapKV is the end-to-end reference
  // Peak RSS (column 15): the process's, so at least the KV cache's peak (column 14), and plausible.
  for (const auto* row : {&full, &snap}) {
    EXPECT_GE(std::stod((*row)[14]), std::stod((*row)[13])) << result.output;
    EXPECT_LT(std::stod((*row)[14]), 4096.0) << result.output;
  }
  // Per-step capture + eviction while decoding (columns 16, 17): none for the full cache, next
  // to nothing for a one-shot press (the hooks' timers), some for Moment-KV, which captures
  // and evicts every step.
  EXPECT_EQ(full[15], "0.000");
  EXPECT_LT(std::stod(snap[15]), 0.05);
  const auto per_step = row_cells(result.output, "| 96 | snapkv:window=8+moment_kv:decode_budget=8 | 32 |");
  ASSERT_EQ(per_step.size(), 17u) << result.output;
  EXPECT_GT(std::stod(per_step[15]), 0.0);
  // The per-window table: three windows of 8 steps, and the ratio of the last to the first.
  EXPECT_NE(result.output.find("| press | 1-8 | 9-16 | 17-24 | last / first |"), std::string::npos) << result.output;
  const auto moment = row_cells(result.output, "| snapkv:window=8+moment_kv:decode_budget=8 |");
  ASSERT_EQ(moment.size(), 5u) << result.output;
  for (size_t w = 1; w < 4; ++w) EXPECT_GT(std::stod(moment[w]), 0.0);
}

// Several budgets in one run: a row per press and budget (full once), each compared with
// SnapKV at its own budget, KV after eviction growing with the budget. Mutant tried: every
// row measured with the first budget (the KV ratio check fails).
TEST(PressBenchCommand, SeveralBudgetsGiveARowEach) {
  RandomModelSpec spec;
  spec.n_embd = 256, spec.n_layer = 2, spec.n_head = 4, spec.n_head_kv = 2, spec.n_ff = 128;
  const std::string model = testing::random_model_path(spec);
  const auto result = testing::run_cli("bench-press -m '" + model + "' -p 512 --press 'full;snapkv:window=8;knorm' "
                                       "--kv-budget 64,192 -n 4 --short-context 32 -r 1 2>&1");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("budget 64 per head; 192 per head"), std::string::npos) << result.output;
  EXPECT_EQ(row_cells(result.output, "| 512 | full | - |").size(), 17u) << result.output;
  EXPECT_TRUE(row_cells(result.output, "| 512 | full | 64 |").empty());  // no budget, one row
  const char* presses[] = {"snapkv:window=8", "knorm"};
  for (const char* press : presses) {
    double kv[2];  // KV MiB right after eviction, at 64 and 192 entries per head
    for (int b = 0; b < 2; ++b) {
      const auto row = row_cells(result.output, fmt::format("| 512 | {} | {} |", press, b == 0 ? 64 : 192));
      ASSERT_EQ(row.size(), 17u) << press << "\n" << result.output;
      kv[b] = std::stod(row[12]);
      if (press == presses[0]) EXPECT_EQ(row[11], "1.000");  // SnapKV at its own budget is the reference
    }
    EXPECT_NEAR(kv[0] / kv[1], 64.0 / 192.0, 0.06) << press << "\n" << result.output;
  }
  // A ratio list is a row per ratio too.
  const auto ratios = testing::run_cli("bench-press -m '" + model + "' -p 96 --press 'snapkv:window=8' "
                                       "--kv-ratio 0.5,0.75 -n 4 --short-context 32 -r 1 2>&1");
  ASSERT_EQ(ratios.status, 0) << ratios.output;
  EXPECT_EQ(row_cells(ratios.output, "| 96 | snapkv:window=8 | r0.5 |").size(), 17u) << ratios.output;
  EXPECT_EQ(row_cells(ratios.output, "| 96 | snapkv:window=8 | r0.75 |").size(), 17u);
  const auto bad = testing::run_cli("bench-press -m '" + model + "' -p 96 --kv-budget 16,x -r 1 2>&1");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("--kv-budget"), std::string::npos) << bad.output;
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
