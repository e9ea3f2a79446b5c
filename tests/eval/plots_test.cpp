// The sweep plots on hand-made summaries: when score vs budget is drawn and what it
// holds, the cost bars' values, and the axis rounding they share.
#include <gtest/gtest.h>

#include "eval/plots/cost_bars.h"
#include "eval/plots/plot_style.h"
#include "eval/plots/score_budget_plot.h"

namespace deferkv::eval {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

SummaryRow row(const std::string& method, const std::string& budget, double average, int64_t peak_kv) {
  SummaryRow r;
  r.method = method;
  r.budget = budget;
  r.label = budget.empty() ? method : method + "@" + budget;
  r.average = average;
  r.cost.peak_kv_bytes = peak_kv;
  r.cost.prefill_seconds = 0.125;
  r.cost.decode_tokens_per_second = 40;
  return r;
}

Summary summary_of(std::vector<SummaryRow> rows) {
  Summary s{Benchmark::kLongBench, {}, {}};
  s.tables.push_back({"LongBench", std::nullopt, {"trec"}, std::move(rows)});
  return s;
}

TEST(Plots, ScoreVsBudgetNeedsTwoBudgets) {
  EXPECT_FALSE(score_budget_svg(summary_of({row("full", "", 50, 1), row("snapkv", "64", 40, 1)})));
  EXPECT_FALSE(score_budget_svg(Summary{Benchmark::kRuler, {}, {}}));
}

TEST(Plots, ScoreVsBudgetDrawsALinePerPressAndTheFullCacheLevel) {
  const auto svg = score_budget_svg(summary_of({row("full", "", 50, 1), row("snapkv", "r0.5", 40, 1),
                                                row("snapkv", "r0.75", 30, 1), row("tova", "r0.5", 20, 1),
                                                row("tova", "r0.75", 10, 1)}));
  ASSERT_TRUE(svg);
  // Two press lines, the dashed full-cache level and its legend sample.
  EXPECT_EQ(count_of(*svg, "<polyline"), 4u);
  EXPECT_EQ(count_of(*svg, "stroke-dasharray"), 2u);
  EXPECT_EQ(count_of(*svg, "<circle"), 4u);
  EXPECT_NE(svg->find(">compression ratio</text>"), std::string::npos);
  EXPECT_NE(svg->find(">r0.75</text>"), std::string::npos);
  // y runs 0..50 over 296 px from y = 44: snapkv's 40 at r0.5 is at 44 + 296 * (1 - 40/50).
  EXPECT_NE(svg->find("points=\"180.0,103.2 400.0,162.4\""), std::string::npos) << *svg;
}

TEST(Plots, CostBarsShowEachMethodsValues) {
  SummaryRow snapkv = row("snapkv", "64", 40, 1048576);
  snapkv.cost.kv_bytes_after_eviction = 262144;
  const std::string svg = cost_bars_svg(summary_of({row("full", "", 50, 2 * 1048576), snapkv}));
  EXPECT_EQ(count_of(svg, "<rect"), 1u + 4u * 2u);
  EXPECT_NE(svg.find(">0.25</text>"), std::string::npos);  // snapkv's KV after eviction MiB
  EXPECT_EQ(count_of(svg, ">2.00</text>"), 2u);  // full's held KV is its peak, in both panels
  EXPECT_NE(svg.find(">2.00</text>"), std::string::npos);  // peak KV MiB
  EXPECT_NE(svg.find(">0.125</text>"), std::string::npos);  // prefill s
  EXPECT_NE(svg.find(">40.0</text>"), std::string::npos);   // decode tok/s
  EXPECT_NE(svg.find(">snapkv@64</text>"), std::string::npos);
}

TEST(Plots, AxisMaximumIsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(round_axis_max(0), 1);
  EXPECT_DOUBLE_EQ(round_axis_max(0.42), 0.5);
  EXPECT_DOUBLE_EQ(round_axis_max(18.18), 20);
  EXPECT_DOUBLE_EQ(round_axis_max(100), 100);
  EXPECT_DOUBLE_EQ(round_axis_max(101), 200);
}

}  // namespace
}  // namespace deferkv::eval
