#pragma once
// SVG plots also as PNG, through the first converter on PATH of rsvg-convert, inkscape
// and ImageMagick's convert. With none installed the PNGs are skipped (the caller says so).
#include <optional>
#include <string>

namespace deferkv::eval {

// The converter's name, nullopt when none is on PATH.
std::optional<std::string> find_svg_converter();

// Writes `png` from `svg` with `converter` (a name find_svg_converter gives); false when
// the converter fails or leaves no file.
bool svg_to_png(const std::string& converter, const std::string& svg, const std::string& png);

}  // namespace deferkv::eval
