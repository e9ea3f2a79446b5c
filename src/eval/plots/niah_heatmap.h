#pragma once
// The Needle-in-a-Haystack heat map of the KV-compression papers: context length across,
// needle depth down (0 % at the top), each cell coloured by its score on the 0-100 scale
// with their red-yellow-green map (#F0496E, #EBB839, #0CD79F); empty cells are grey.
#include <string>

#include "eval/reports/summary.h"

namespace deferkv::eval {

std::string niah_heatmap_svg(const NiahGrid& grid);

// The colour of a 0-100 score, as "#rrggbb".
std::string niah_score_colour(double score);

}  // namespace deferkv::eval
