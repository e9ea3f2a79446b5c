#pragma once
// A small SVG writer: rectangles, lines and text in user units, written out as one
// standalone document. Text is XML-escaped.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deferkv::eval {

class Svg {
 public:
  Svg(double width, double height);

  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view stroke = "none");
  void line(double x1, double y1, double x2, double y2, std::string_view stroke);
  // dash: an SVG stroke-dasharray ("6 4"), "" for a solid line.
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width = 2,
                std::string_view dash = "");
  void circle(double cx, double cy, double r, std::string_view fill);
  // anchor: "start", "middle" or "end"; rotate: degrees about (x, y).
  void text(double x, double y, std::string_view content, double size = 12, std::string_view anchor = "middle",
            double rotate = 0, std::string_view weight = "normal");

  std::string str() const;

  static std::string escape(std::string_view text);

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace deferkv::eval
