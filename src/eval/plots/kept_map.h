#pragma once
// The kept-token map of one run: layers down (layer 0 at the top), positions across (the
// prompt, and any tokens decoded before the eviction), a cell shaded by the share of the
// layer's KV heads that kept its position after eviction (white: none of them, dark blue:
// all). More positions than the map is wide are binned: a cell then covers several
// positions and its share is over all of them.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/embedding.h"

namespace deferkv::eval {

struct KeptGrid {
  int64_t positions_per_cell = 1;
  std::vector<std::vector<double>> share;  // [layer][cell], 0..1
};

// At most `max_cells` cells a row (the positions per cell rounded up). A position outside
// [0, kept.tokens) is an error naming it.
KeptGrid kept_grid(const KeptSet& kept, int64_t max_cells);

// The map with `title` (bold) and `subtitle` above it; the SVG is widened to fit them.
std::string kept_map_svg(const KeptSet& kept, const std::string& title, const std::string& subtitle);

// "kept-<label>.svg": the map's file in a results folder (deferkv eval draws it; the reports
// link it).
std::string kept_map_file(const std::string& label);

// The colour of a share of heads above 0 (light blue) up to 1 (dark blue), as "#rrggbb".
std::string kept_share_colour(double share);

}  // namespace deferkv::eval
