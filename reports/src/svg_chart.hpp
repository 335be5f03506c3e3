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

// The i-th color of a categorical palette of sixteen (cycles after that).
const char* color(std::size_t i);

// The smallest multiple of a 1-2-5 step (one of about five over [0, v]) at or above v: an axis end
// that is a round tick.
double nice_ceiling(double v);

// An axis of seconds in the one unit that suits `hi` (s, min, h or days), with round ticks in it.
struct Axis;
Axis seconds_axis(double hi, std::string label);

struct Axis {
  double lo = 0, hi = 1;
  std::string label = {};
  std::function<std::string(double)> format = {};       // tick labels; default: %g
  std::vector<std::pair<double, std::string>> ticks = {};  // explicit ticks; default: round ones, 1-2-5 steps
  bool log = false;                                      // log10 scale (lo > 0)
};

// An axis of times from `lo` to `hi` (seconds, lo > 0): log10 over whole decades where they spread over
// more than a factor of 50, else seconds_axis.
Axis time_axis(double lo, double hi, std::string label);

// A cumulative distribution of `sorted` values as a polyline's points: (first, 0), then at most about
// 400 steps, then (last, 1).
std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& sorted);

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
  // A color scale for shaded marks: swatches of `color` at each stop's opacity, with its label.
  void color_scale(const char* color, const std::vector<std::pair<double, std::string>>& stops);

  void write(std::ostream& out) const;

 private:
  std::string id_, title_;
  Axis x_, y_;
  double width_, height_;
  std::string body_;
  std::vector<std::pair<std::string, const char*>> legend_;
  std::string scale_color_;
  std::vector<std::pair<double, std::string>> scale_stops_;
};

// A page: title, a style sheet, and a script that records on <body> how many charts there are and
// how many laid out with data marks (data-charts, data-rendered), for headless-browser tests.
void page_begin(std::ostream& out, std::string_view title);
void page_end(std::ostream& out);

}  // namespace fleetsim::html
