// Inline SVG charts for the HTML reports: a plot area with axes, ticks and labels, and marks given
// in data coordinates. Every data mark carries the class "mark", so a browser test can check that a
// chart drew something. Self-contained: no scripts, fonts or files from elsewhere.
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fleetsim::html {

// Text made safe for HTML and SVG.
std::string escape(std::string_view text);

// The i-th color of a categorical palette (cycles after ten).
const char* color(std::size_t i);

struct Axis {
  double lo = 0, hi = 1;
  std::string label = {};
  std::function<std::string(double)> format = {};       // tick labels; default: %g
  std::vector<std::pair<double, std::string>> ticks = {};  // explicit ticks; default: five even ones
  bool log = false;                                      // log10 scale (lo > 0)
};

class SvgChart {
 public:
  SvgChart(std::string id, std::string title, Axis x, Axis y, double width = 720, double height = 260);

  double px(double x) const;
  double py(double y) const;

  void polyline(std::span<const std::pair<double, double>> points, const char* color, std::string_view name = {});
  // A rectangle from (x0, y0) to (x1, y1), with a tooltip.
  void rect(double x0, double x1, double y0, double y1, const char* color, std::string_view tooltip = {}, double opacity = 1);
  void circle(double x, double y, double radius_px, const char* color, bool filled, std::string_view tooltip = {});
  // A vertical error bar at x from lo to hi.
  void error_bar(double x, double lo, double hi, const char* color);
  // A reference line (not a data mark), dashed or not.
  void guide(double x0, double y0, double x1, double y1, const char* color, bool dashed);
  void legend(const std::vector<std::pair<std::string, const char*>>& entries);

  void write(std::ostream& out) const;

 private:
  std::string id_, title_;
  Axis x_, y_;
  double width_, height_;
  std::string body_;
  std::vector<std::pair<std::string, const char*>> legend_;
};

// A page: title, a style sheet, and a script that records on <body> how many charts there are and
// how many laid out with data marks (data-charts, data-rendered), for headless-browser tests.
void page_begin(std::ostream& out, std::string_view title);
void page_end(std::ostream& out);

}  // namespace fleetsim::html
