// The kvpress protocol's parts without running a model: which presses run in which question
// mode, the default sample count, and the leaderboard's table and plot on hand-made scores.
// The protocol end to end: tests/tools/eval_protocol_command_test.cpp.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_protocol.h"
#include "eval/plots/leaderboard_plot.h"
#include "eval/reports/leaderboard.h"
#include "press/registry.h"

namespace deferkv::eval {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool builds_with_defaults(const std::string& name) {
  try {
    make_press(name, KvBudget::ratio(0.5));
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Every method that takes a budget and needs no file is in the default list; those that need
// a profile, weights or a draft model are not (speckv joins when a draft model is given).
TEST(KvpressProtocol, DefaultPressesAreEveryMethodThatRunsWithoutAFile) {
  const KvpressPresses presses = kvpress_presses({}, false);
  for (const char* absent : {"full", "moment_kv", "compresskv", "lookaheadkv", "speckv"}) {
    EXPECT_FALSE(has(presses.agnostic, absent)) << absent;
  }
  for (const char* present : {"streaming_llm", "knorm", "snapkv", "pyramidkv", "adakv", "chunkkv", "deferkv", "deferkv:d=4"}) {
    EXPECT_TRUE(has(presses.agnostic, present)) << present;
  }
  // Complete: a catalogue method left out takes no budget, fails without its file, drafts or
  // runs rows trained for one model (lookaheadkv builds without weights= and looks beside
  // the model for them when attached).
  for (const PressInfo& info : press_catalogue()) {
    if (has(presses.agnostic, info.name)) continue;
    EXPECT_TRUE(!info.uses_budget || !builds_with_defaults(info.name) || info.name == "speckv" ||
                press_runs_learned_rows(info.name))
        << info.name;
  }
  for (const std::string& spec : presses.agnostic) EXPECT_TRUE(builds_with_defaults(spec)) << spec;
  const auto deferkv = std::find(presses.agnostic.begin(), presses.agnostic.end(), "deferkv");
  ASSERT_NE(deferkv, presses.agnostic.end());
  EXPECT_EQ(*(deferkv + 1), "deferkv:d=4");
  // "full" alone (eval's default --press) is the default list too.
  EXPECT_EQ(kvpress_presses({"full"}, false).agnostic, presses.agnostic);
  EXPECT_TRUE(has(kvpress_presses({}, true).agnostic, "speckv"));
}

// kvpress's question-aware loop (snapkv, adakv_snapkv, finch, chunkkv) and deferkv, in the
// question-agnostic list's order; finch only where it is registered.
TEST(KvpressProtocol, QuestionAwareSetIsKvpressesAndDeferkv) {
  const KvpressPresses presses = kvpress_presses({}, false);
  std::vector<std::string> expected;
  for (const std::string& spec : presses.agnostic) {
    if (spec == "snapkv" || spec == "adakv" || spec == "chunkkv" || spec == "finch" || spec == "deferkv" ||
        spec == "deferkv:d=4") {
      expected.push_back(spec);
    }
  }
  EXPECT_EQ(presses.aware, expected);
  EXPECT_EQ(std::set<std::string>(expected.begin(), expected.end()).count("snapkv"), 1u);
  EXPECT_GE(presses.aware.size(), 5u);
}

TEST(KvpressProtocol, GivenPressesAreKeptInOrderWithTheirParameters) {
  const KvpressPresses presses =
      kvpress_presses({"full", "knorm", "snapkv:window=16", "snapkv+tova", "deferkv:d=4", "knorm"}, false);
  EXPECT_EQ(presses.agnostic, (std::vector<std::string>{"knorm", "snapkv:window=16", "snapkv+tova", "deferkv:d=4"}));
  // A composition is question-agnostic only, as kvpress runs none question-aware.
  EXPECT_EQ(presses.aware, (std::vector<std::string>{"snapkv:window=16", "deferkv:d=4"}));
}

TEST(KvpressProtocol, AnUnknownPressOrParameterIsRefusedByName) {
  try {
    kvpress_presses({"knorm", "nosuchpress"}, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown press 'nosuchpress'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kvpress_presses({"snapkv:nosuchkey=1"}, false), Error);
}

// 11 tasks, 3 presses question-agnostic of which 1 also aware, 4 ratios: 11 * (1 + 4 * 4) =
// 187 rows a sample; 1600 / 187 = 8.6, so 8 samples per task. A grid too large for even one
// sample in 1600 rows still runs one.
TEST(KvpressProtocol, DefaultSamplesFitTheRowBudget) {
  const KvpressPresses presses{{"knorm", "snapkv", "tova"}, {"snapkv"}};
  EXPECT_EQ(kvpress_rows_per_sample(presses, 11, 4), 187);
  EXPECT_EQ(kvpress_default_samples(presses, 11, 4), 8);
  EXPECT_EQ(kvpress_default_samples(presses, 1, 1), 1600 / 5);  // 1 * (1 + 1 * 4) rows
  const KvpressPresses many{std::vector<std::string>(40, "knorm"), std::vector<std::string>(10, "snapkv")};
  EXPECT_EQ(kvpress_default_samples(many, 13, 4), 1);
}

TEST(KvpressProtocol, RatiosAndProtocolNames) {
  EXPECT_EQ(kvpress_ratios(), (std::vector<double>{0.25, 0.5, 0.75, 0.875}));
  EXPECT_EQ(eval_protocol_from_name("kvpress"), EvalProtocol::kKvpress);
  try {
    eval_protocol_from_name("ruler");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown protocol 'ruler' (known: kvpress)"), std::string::npos) << e.what();
  }
}

Leaderboard board_of() {
  Leaderboard b;
  b.title = "kvpress protocol: RULER at 4096 tokens";
  b.ratios = {0.25, 0.5, 0.75, 0.875};
  b.full = 80;
  b.lines.push_back({"knorm", true, {70.0, 50.0, 30.0, 10.0}, {0, 0, 0, 0}, "", 40.0});
  b.lines.push_back({"snapkv", true, {75.0, 60.0, std::nullopt, 20.0}, {0, 0, 2, 0}, "the budget is below the window", 155.0 / 3});
  b.lines.push_back({"snapkv", false, {78.0, 70.0, 55.0, 40.0}, {0, 0, 0, 0}, "", 60.75});
  return b;
}

TEST(KvpressProtocol, LeaderboardTableHasEveryPressAndModeAtEveryRatio) {
  const std::string md = leaderboard_markdown(board_of());
  EXPECT_NE(md.find("| press | question | 0.25 | 0.5 | 0.75 | 0.875 | Avg. |"), std::string::npos) << md;
  EXPECT_NE(md.find("| full cache (ceiling) | — | 80.00 | 80.00 | 80.00 | 80.00 | 80.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| knorm | question-agnostic | 70.00 | 50.00 | 30.00 | 10.00 | 40.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | question-agnostic | 75.00 | 60.00 | failed | 20.00 | 51.67 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | question-aware | 78.00 | 70.00 | 55.00 | 40.00 | 60.75 |"), std::string::npos) << md;
  EXPECT_NE(md.find("snapkv (question-agnostic): 2 failed row(s): the budget is below the window"), std::string::npos);
  const std::string csv = leaderboard_csv(board_of());
  EXPECT_EQ(count_of(csv, "\n"), 1u + 1u + 3u * 4u);
  EXPECT_NE(csv.find("full,,0,80.00,0,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("snapkv,false,0.875,40.00,0,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("snapkv,true,0.75,,2,the budget is below the window\n"), std::string::npos) << csv;
  const auto json = leaderboard_json(board_of());
  EXPECT_EQ(json["lines"][2]["scores"]["0.875"], 40.0);
  EXPECT_TRUE(json["lines"][1]["scores"]["0.75"].is_null());
}

// The plot's geometry, by hand: the plot spans x 70..530 for ratios 0..1 and y 44..384 for
// scores 100..0 (the largest score, 80, rounds up to an axis of 100).
TEST(KvpressProtocol, LeaderboardPlotHasALinePerPressAndModeAndTheCeiling) {
  const std::string svg = leaderboard_svg(board_of());
  // Three lines and their legend swatches, and the ceiling with its swatch.
  EXPECT_EQ(count_of(svg, "<polyline"), 8u);
  // knorm at 0.5 scores 50: x = 70 + 460 * 0.5, y = 44 + 340 * 0.5; at 0.875 (10): x = 472.5, y = 350.
  EXPECT_NE(svg.find("points=\"185.0,146.0 300.0,214.0 415.0,282.0 472.5,350.0\""), std::string::npos) << svg;
  // snapkv's line joins the three ratios that have a score (0.75 failed).
  EXPECT_NE(svg.find("points=\"185.0,129.0 300.0,180.0 472.5,316.0\""), std::string::npos) << svg;
  // The ceiling: 80 across the whole axis, dashed.
  EXPECT_NE(svg.find("points=\"70.0,112.0 530.0,112.0\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1.5\" "
                     "stroke-dasharray=\"6 4\""),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find(">full cache (ceiling)<"), std::string::npos);
  // The question-aware line dashed, in snapkv's colour.
  EXPECT_EQ(count_of(svg, "stroke-dasharray=\"3 3\""), 2u);
  EXPECT_NE(svg.find(">snapkv (question-aware)<"), std::string::npos);
  EXPECT_EQ(count_of(svg, "stroke=\"#F28E2B\" stroke-width=\"2.0\""), 4u);  // snapkv: two lines, two swatches
}

}  // namespace
}  // namespace deferkv::eval
