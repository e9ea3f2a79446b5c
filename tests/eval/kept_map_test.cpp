// The kept-token map on a hand-made kept set: each cell's share of heads, binning when the
// positions outnumber the cells, and the SVG's rows of cells.
// Mutant tried: dividing a binned cell by the positions per cell instead of its own width
// (the short last cell's share then fails).
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "eval/plots/kept_map.h"

namespace deferkv::eval {
namespace {

// 2 layers x 2 KV heads over 9 positions.
KeptSet hand_made() {
  KeptSet kept{2, 2, 9, {}};
  kept.positions = {{0, 1, 8}, {1, 5, 8},  // layer 0: heads 0 and 1
                    {2}, {}};              // layer 1
  return kept;
}

TEST(KeptMap, EachCellIsTheShareOfTheLayersHeadsThatKeptIt) {
  const KeptGrid grid = kept_grid(hand_made(), 100);
  EXPECT_EQ(grid.positions_per_cell, 1);
  EXPECT_EQ(grid.share[0], (std::vector<double>{0.5, 1, 0, 0, 0, 0.5, 0, 0, 1}));
  EXPECT_EQ(grid.share[1], (std::vector<double>{0, 0, 0.5, 0, 0, 0, 0, 0, 0}));
}

TEST(KeptMap, MorePositionsThanCellsAreBinned) {
  // 9 positions in at most 4 cells: 3 a cell, {0,1,2} {3,4,5} {6,7,8}.
  const KeptGrid grid = kept_grid(hand_made(), 4);
  EXPECT_EQ(grid.positions_per_cell, 3);
  EXPECT_EQ(grid.share[0], (std::vector<double>{3.0 / 6, 1.0 / 6, 2.0 / 6}));
  // 9 positions in at most 2 cells: 5 a cell, and a last cell of 4 positions.
  const KeptGrid two = kept_grid(hand_made(), 2);
  EXPECT_EQ(two.positions_per_cell, 5);
  EXPECT_EQ(two.share[0], (std::vector<double>{3.0 / 10, 3.0 / 8}));
  EXPECT_EQ(two.share[1], (std::vector<double>{1.0 / 10, 0.0}));
}

TEST(KeptMap, APositionBeyondThoseFedIsAnError) {
  KeptSet kept = hand_made();
  kept.positions[3] = {9};
  try {
    kept_grid(kept, 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a kept position 9 is outside the 9 positions fed"), std::string::npos) << e.what();
  }
}

TEST(KeptMap, TheSvgHasARowOfDarkCellsPerLayer) {
  const std::string svg = kept_map_svg(hand_made(), "snapkv@8: KV positions kept per layer", "a subtitle");
  std::map<double, std::vector<std::string>> rows;  // y → fills, the map's 14 px cells only
  const std::regex rect(R"re(<rect x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="14.0" fill="(#[0-9A-F]+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), rect), end; it != end; ++it) rows[std::stod((*it)[1])].push_back((*it)[2]);
  ASSERT_EQ(rows.size(), 2u) << svg;
  const std::string half = kept_share_colour(0.5), all = kept_share_colour(1);
  EXPECT_EQ(rows.begin()->second, (std::vector<std::string>{half, all, half, all}));
  EXPECT_EQ(rows.rbegin()->second, (std::vector<std::string>{half}));
  EXPECT_NE(half, all);
  EXPECT_NE(svg.find(">snapkv@8: KV positions kept per layer</text>"), std::string::npos);
}

TEST(KeptMap, ATitleLongerThanTheMapWidensTheSvg) {
  const std::string title(120, 'x');
  const std::string svg = kept_map_svg(hand_made(), title, "");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex(R"re(<svg[^>]* width="([0-9.]+)")re")));
  EXPECT_GE(std::stod(m[1]), 9.0 * 120);
}

}  // namespace
}  // namespace deferkv::eval
