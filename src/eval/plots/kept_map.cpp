#include "eval/plots/kept_map.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/plots/plot_style.h"
#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kMapWidth = 800, kLeft = 64, kTop = 60, kRight = 24;
constexpr int64_t kLegendSteps = 10;

}  // namespace

KeptGrid kept_grid(const KeptSet& kept, int64_t max_cells) {
  KeptGrid grid;
  const int64_t tokens = std::max<int64_t>(kept.tokens, 1);
  grid.positions_per_cell = (tokens + max_cells - 1) / max_cells;
  const int64_t cells = (tokens + grid.positions_per_cell - 1) / grid.positions_per_cell;
  for (int64_t l = 0; l < kept.n_layer; ++l) {
    std::vector<double> count(static_cast<size_t>(cells), 0.0);
    for (int64_t h = 0; h < kept.n_head_kv; ++h) {
      for (int32_t p : kept.head(l, h)) {
        if (p < 0 || p >= tokens) fail("a kept position {} is outside the {} positions fed", p, kept.tokens);
        count[static_cast<size_t>(p / grid.positions_per_cell)] += 1;
      }
    }
    for (int64_t c = 0; c < cells; ++c) {
      // The last cell may cover fewer positions.
      const int64_t width = std::min(grid.positions_per_cell, tokens - c * grid.positions_per_cell);
      count[static_cast<size_t>(c)] /= static_cast<double>(width * kept.n_head_kv);
    }
    grid.share.push_back(std::move(count));
  }
  return grid;
}

std::string kept_map_file(const std::string& label) { return "kept-" + file_label(label) + ".svg"; }

std::string kept_share_colour(double share) {
  // #C6DBEF (light) to #08306B (dark), ColorBrewer's Blues.
  const double t = std::clamp(share, 0.0, 1.0);
  const auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  return fmt::format("#{:02X}{:02X}{:02X}", mix(0xC6, 0x08), mix(0xDB, 0x30), mix(0xEF, 0x6B));
}

std::string kept_map_svg(const KeptSet& kept, const std::string& title, const std::string& subtitle) {
  const KeptGrid grid = kept_grid(kept, static_cast<int64_t>(kMapWidth));
  const double cells = grid.share.empty() ? 1.0 : static_cast<double>(grid.share.front().size());
  const double cell_width = kMapWidth / cells;
  const double row = kept.n_layer <= 40 ? 14 : std::max(3.0, 560.0 / static_cast<double>(kept.n_layer));
  const double map_height = row * static_cast<double>(kept.n_layer);
  // Bold 14 px text is at most about 9 px a character, 11 px text about 7.
  const double width = std::max({kLeft + kMapWidth + kRight, 9.0 * static_cast<double>(title.size()) + 20,
                                 7.0 * static_cast<double>(subtitle.size()) + 20});
  const double height = kTop + map_height + 90;
  Svg svg(width, height);
  svg.text(width / 2, 22, title, 14, "middle", 0, "bold");
  svg.text(width / 2, 40, subtitle, 11);
  // One row per layer; only the cells some head kept are drawn.
  const int64_t label_every = row >= 10 ? 1 : static_cast<int64_t>(std::ceil(10 / row));
  for (int64_t l = 0; l < kept.n_layer; ++l) {
    const double y = kTop + row * static_cast<double>(l);
    if (l % label_every == 0) svg.text(kLeft - 6, y + row / 2 + 4, std::to_string(l), 10, "end");
    const std::vector<double>& shares = grid.share[static_cast<size_t>(l)];
    for (size_t c = 0; c < shares.size(); ++c) {
      if (shares[c] > 0) svg.rect(kLeft + cell_width * static_cast<double>(c), y, cell_width, row, kept_share_colour(shares[c]));
    }
  }
  const double bottom = kTop + map_height;
  svg.line(kLeft, kTop, kLeft + kMapWidth, kTop, "#999999");
  svg.line(kLeft, bottom, kLeft + kMapWidth, bottom, "#999999");
  svg.line(kLeft, kTop, kLeft, bottom, "#999999");
  svg.line(kLeft + kMapWidth, kTop, kLeft + kMapWidth, bottom, "#999999");
  for (int q = 0; q <= 4; ++q) {
    const double x = kLeft + kMapWidth * q / 4;
    svg.line(x, bottom, x, bottom + 4, "black");
    svg.text(x, bottom + 16, std::to_string(kept.tokens * q / 4), 10);
  }
  svg.text(kLeft + kMapWidth / 2, bottom + 34,
           grid.positions_per_cell == 1 ? "position"
                                        : fmt::format("position ({} positions a cell)", grid.positions_per_cell),
           12);
  svg.text(16, kTop + map_height / 2, "layer", 12, "middle", -90);
  // The legend, a row of steps below the axis: the share of the layer's KV heads.
  const double legend_y = bottom + 50, step = 24, legend_x = kLeft + kMapWidth - step * kLegendSteps;
  svg.text(legend_x - 8, legend_y + 10, "share of the layer's KV heads that kept it: 0.1", 10, "end");
  for (int64_t i = 0; i < kLegendSteps; ++i) {
    svg.rect(legend_x + step * static_cast<double>(i), legend_y, step, 12,
             kept_share_colour(static_cast<double>(i + 1) / kLegendSteps));
  }
  svg.text(legend_x + step * kLegendSteps + 4, legend_y + 10, "1", 10, "start");
  return svg.str();
}

}  // namespace deferkv::eval
