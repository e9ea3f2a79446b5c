#include "eval/plots/svg.h"

#include <fmt/format.h>

namespace deferkv::eval {

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view stroke) {
  body_ += fmt::format(R"svg(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" stroke="{}"/>)svg", x, y, w,
                       h, escape(fill), escape(stroke));
  body_ += '\n';
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke) {
  body_ += fmt::format(R"svg(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}"/>)svg", x1, y1, x2, y2,
                       escape(stroke));
  body_ += '\n';
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                   std::string_view dash) {
  std::string coordinates;
  for (const auto& [x, y] : points) coordinates += fmt::format("{}{:.1f},{:.1f}", coordinates.empty() ? "" : " ", x, y);
  const std::string dashes = dash.empty() ? "" : fmt::format(R"svg( stroke-dasharray="{}")svg", escape(dash));
  body_ += fmt::format(R"svg(<polyline points="{}" fill="none" stroke="{}" stroke-width="{:.1f}"{}/>)svg", coordinates,
                       escape(stroke), width, dashes);
  body_ += '\n';
}

void Svg::circle(double cx, double cy, double r, std::string_view fill) {
  body_ += fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}"/>)svg", cx, cy, r, escape(fill));
  body_ += '\n';
}

void Svg::text(double x, double y, std::string_view content, double size, std::string_view anchor, double rotate,
               std::string_view weight) {
  const std::string transform =
      rotate != 0 ? fmt::format(R"svg( transform="rotate({:.0f} {:.1f} {:.1f})")svg", rotate, x, y) : "";
  body_ += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" font-size="{:.0f}" text-anchor="{}" font-weight="{}"{}>{}</text>)svg",
                       x, y, size, anchor, weight, transform, escape(content));
  body_ += '\n';
}

std::string Svg::str() const {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"Helvetica, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{2}</svg>\n",
      width_, height_, body_);
}

std::string Svg::escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace deferkv::eval
