#include "eval/plots/png_export.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

bool on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string_view rest(path);
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) {
      std::error_code ec;
      const std::filesystem::path candidate = std::filesystem::path(dir) / name;
      if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return true;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return false;
}

// A path as one shell word.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::optional<std::string> find_svg_converter() {
  for (const char* name : {"rsvg-convert", "inkscape", "convert"}) {
    if (on_path(name)) return name;
  }
  return std::nullopt;
}

bool svg_to_png(const std::string& converter, const std::string& svg, const std::string& png) {
  std::string command;
  if (converter == "rsvg-convert") {
    command = fmt::format("rsvg-convert -o {} {}", quoted(png), quoted(svg));
  } else if (converter == "inkscape") {
    command = fmt::format("inkscape {} --export-type=png --export-filename={}", quoted(svg), quoted(png));
  } else if (converter == "convert") {
    command = fmt::format("convert {} {}", quoted(svg), quoted(png));
  } else {
    fail("unknown SVG converter '{}' (rsvg-convert, inkscape, convert)", converter);
  }
  std::filesystem::remove(png);
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0 && std::filesystem::is_regular_file(png);
}

}  // namespace deferkv::eval
