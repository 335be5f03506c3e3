#include "svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "readable.hpp"

namespace fleetsim::html {
namespace {

constexpr double kLeft = 90, kRight = 150, kTop = 34, kBottom = 46;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string default_format(double v) { return readable(v, 6); }

// A step of 1, 2 or 5 times a power of ten that cuts `span` into about five.
double nice_step(double span) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / 5, decade = std::pow(10.0, std::floor(std::log10(raw))), f = raw / decade;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * decade;
}

std::vector<std::pair<double, std::string>> ticks_of(const Axis& a) {
  if (!a.ticks.empty()) return a.ticks;
  std::vector<std::pair<double, std::string>> t;
  const auto& format = a.format ? a.format : default_format;
  if (a.log) {
    for (double d = std::floor(std::log10(a.lo)); d <= std::ceil(std::log10(a.hi)); ++d) {
      const double v = std::pow(10.0, d);
      if (v >= a.lo * (1 - 1e-9) && v <= a.hi * (1 + 1e-9)) t.emplace_back(v, format(v));
    }
    return t;
  }
  const double step = nice_step(a.hi - a.lo);
  for (double k = std::ceil(a.lo / step - 1e-9); k * step <= a.hi + step * 1e-9; ++k) {
    const double v = k * step;
    t.emplace_back(v, format(std::abs(v) < step * 1e-9 ? 0.0 : v));
  }
  return t;
}

double fraction(const Axis& a, double v) {
  if (a.log) return (std::log10(std::max(v, a.lo)) - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo));
  return a.hi > a.lo ? (v - a.lo) / (a.hi - a.lo) : 0;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&quot;"; break;
      default: s += c;
    }
  }
  return s;
}

const char* color(std::size_t i) {
  // Tableau's ten, then six darker hues that stay apart from them.
  static constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                             "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#00a087"};
  return kPalette[i % 16];
}

double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  const double step = nice_step(v);
  return std::ceil(v / step - 1e-9) * step;
}

Axis seconds_axis(double hi, std::string label) {
  const TimeUnit unit = time_unit_for(hi);
  const double top = nice_ceiling(std::max(hi, 1e-9) / unit.seconds);
  Axis axis{.lo = 0, .hi = top * unit.seconds, .label = std::move(label)};
  const double step = nice_step(top);
  for (double k = 0; k * step <= top * (1 + 1e-9); ++k) {
    axis.ticks.emplace_back(k * step * unit.seconds, readable(k * step, 4) + " " + unit.name);
  }
  return axis;
}

Axis time_axis(double lo, double hi, std::string label) {
  if (hi / lo <= 50) return seconds_axis(hi * 1.05, std::move(label));
  Axis axis{.lo = std::pow(10.0, std::floor(std::log10(lo))), .hi = std::pow(10.0, std::ceil(std::log10(hi))), .label = std::move(label),
            .format = [](double s) { return format_quantity(s, Dimension::time); }, .log = true};
  // Ticks at round times in the unit each reads best in (1 and 10 of it), not at decades of seconds,
  // which read as "1.67 min" and "2.78 h".
  static const std::pair<double, const char*> kTicks[] = {
      {1e-3, "1 ms"}, {1e-2, "10 ms"}, {0.1, "100 ms"}, {1, "1 s"},    {10, "10 s"},        {60, "1 min"},
      {600, "10 min"}, {3600, "1 h"}, {36000, "10 h"}, {86400, "1 day"}, {864000, "10 days"}, {8640000, "100 days"}};
  for (const auto& [at, text] : kTicks) {
    if (at >= axis.lo * (1 - 1e-9) && at <= axis.hi * (1 + 1e-9)) axis.ticks.emplace_back(at, text);
  }
  return axis;
}

std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& v) {
  std::vector<std::pair<double, double>> points;
  if (v.empty()) return points;
  points.emplace_back(v.front(), 0.0);
  const std::size_t step = std::max<std::size_t>(1, v.size() / 400);
  for (std::size_t k = 0; k < v.size(); k += step) points.emplace_back(v[k], static_cast<double>(k + 1) / static_cast<double>(v.size()));
  points.emplace_back(v.back(), 1.0);
  return points;
}

SvgChart::SvgChart(std::string id, std::string title, Axis x, Axis y, double width, double height)
    : id_(std::move(id)), title_(std::move(title)), x_(std::move(x)), y_(std::move(y)), width_(width), height_(height) {}

double SvgChart::px(double x) const { return std::clamp(fraction(x_, x), 0.0, 1.0) * width_; }
double SvgChart::py(double y) const { return (1 - std::clamp(fraction(y_, y), 0.0, 1.0)) * height_; }

void SvgChart::polyline(std::span<const std::pair<double, double>> points, const char* color, std::string_view name) {
  body_ += "<polyline class=\"mark\" fill=\"none\" stroke-width=\"1.5\" stroke=\"";
  body_ += color;
  body_ += "\" points=\"";
  for (const auto& [x, y] : points) body_ += num(px(x)) + "," + num(py(y)) + " ";
  body_ += "\">";
  if (!name.empty()) body_ += "<title>" + escape(name) + "</title>";
  body_ += "</polyline>\n";
}

void SvgChart::rect(double x0, double x1, double y0, double y1, const char* color, std::string_view tooltip, double opacity) {
  const double left = std::min(px(x0), px(x1)), top = std::min(py(y0), py(y1));
  const double w = std::max(std::abs(px(x1) - px(x0)), 0.5), h = std::max(std::abs(py(y1) - py(y0)), 0.5);
  body_ += "<rect class=\"mark\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
           "\" fill=\"" + color + "\"";
  if (opacity < 1) body_ += " fill-opacity=\"" + num(opacity) + "\"";
  if (tooltip.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + escape(tooltip) + "</title></rect>\n";
  }
}

void SvgChart::circle(double x, double y, double radius_px, const char* color, bool filled, std::string_view tooltip) {
  body_ += "<circle class=\"mark\" cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"" + num(radius_px) + "\" stroke=\"" + color +
           "\" fill=\"" + (filled ? color : "none") + "\">";
  if (!tooltip.empty()) body_ += "<title>" + escape(tooltip) + "</title>";
  body_ += "</circle>\n";
}

void SvgChart::error_bar(double x, double lo, double hi, const char* color) {
  const std::string cx = num(px(x));
  body_ += "<path class=\"mark\" stroke=\"" + std::string(color) + "\" d=\"M" + cx + " " + num(py(lo)) + " V" + num(py(hi)) + " M" +
           num(px(x) - 4) + " " + num(py(lo)) + " h8 M" + num(px(x) - 4) + " " + num(py(hi)) + " h8\"/>\n";
}

void SvgChart::guide(double x0, double y0, double x1, double y1, const char* color, bool dashed) {
  body_ += "<line x1=\"" + num(px(x0)) + "\" y1=\"" + num(py(y0)) + "\" x2=\"" + num(px(x1)) + "\" y2=\"" + num(py(y1)) + "\" stroke=\"" +
           color + "\"" + (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
}

void SvgChart::legend(const std::vector<std::pair<std::string, const char*>>& entries) { legend_ = entries; }

void SvgChart::color_scale(const char* color, const std::vector<std::pair<double, std::string>>& stops) {
  scale_color_ = color;
  scale_stops_ = stops;
}

void SvgChart::write(std::ostream& out) const {
  // Labels wider than the space between ticks are slanted, and the chart grows below to hold them.
  const auto x_ticks = ticks_of(x_);
  std::size_t longest = 0;
  for (const auto& tick : x_ticks) longest = std::max(longest, tick.second.size());
  const double label_px = 6.2 * static_cast<double>(longest);
  const bool slanted = x_ticks.size() > 1 && label_px > 0.9 * width_ / static_cast<double>(x_ticks.size());
  const double bottom = slanted ? 30 + 0.58 * label_px : kBottom;
  out << "<svg class=\"chart\" id=\"" << escape(id_) << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width_ + kLeft + kRight)
      << "\" height=\"" << num(height_ + kTop + bottom) << "\" font-family=\"sans-serif\" font-size=\"11\" overflow=\"visible\">\n"
      << "<text x=\"" << num(kLeft) << "\" y=\"16\" font-size=\"13\" font-weight=\"bold\">" << escape(title_) << "</text>\n"
      << "<g transform=\"translate(" << kLeft << "," << kTop << ")\">\n"
      << "<rect width=\"" << num(width_) << "\" height=\"" << num(height_) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (const auto& [v, label] : x_ticks) {
    const double p = px(v);
    out << "<line x1=\"" << num(p) << "\" y1=\"0\" x2=\"" << num(p) << "\" y2=\"" << num(height_) << "\" stroke=\"#eee\"/>";
    if (slanted) {
      out << "<text class=\"tick-x\" transform=\"translate(" << num(p + 3) << "," << num(height_ + 10) << ") rotate(-35)\" text-anchor=\"end\">"
          << escape(label) << "</text>\n";
    } else {
      out << "<text class=\"tick-x\" x=\"" << num(p) << "\" y=\"" << num(height_ + 14) << "\" text-anchor=\"middle\">" << escape(label) << "</text>\n";
    }
  }
  for (const auto& [v, label] : ticks_of(y_)) {
    const double p = py(v);
    out << "<line x1=\"0\" y1=\"" << num(p) << "\" x2=\"" << num(width_) << "\" y2=\"" << num(p) << "\" stroke=\"#eee\"/>"
        << "<text class=\"tick-y\" x=\"-6\" y=\"" << num(p + 4) << "\" text-anchor=\"end\">" << escape(label) << "</text>\n";
  }
  out << "<text x=\"" << num(width_ / 2) << "\" y=\"" << num(height_ + bottom - 12) << "\" text-anchor=\"middle\">" << escape(x_.label) << "</text>\n"
      << "<text transform=\"translate(" << num(-kLeft + 14) << "," << num(height_ / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
      << escape(y_.label) << "</text>\n"
      << body_;
  for (std::size_t i = 0; i < legend_.size(); ++i) {
    const double y = 10 + 16.0 * static_cast<double>(i);
    out << "<rect x=\"" << num(width_ + 10) << "\" y=\"" << num(y - 9) << "\" width=\"10\" height=\"10\" fill=\"" << legend_[i].second << "\"/>"
        << "<text x=\"" << num(width_ + 24) << "\" y=\"" << num(y) << "\">" << escape(legend_[i].first) << "</text>\n";
  }
  for (std::size_t i = 0; i < scale_stops_.size(); ++i) {
    const double y = 10 + 16.0 * static_cast<double>(legend_.size() + i);
    out << "<rect class=\"scale\" x=\"" << num(width_ + 10) << "\" y=\"" << num(y - 9) << "\" width=\"10\" height=\"10\" fill=\"" << scale_color_
        << "\" fill-opacity=\"" << num(scale_stops_[i].first) << "\" stroke=\"#ccc\"/>"
        << "<text x=\"" << num(width_ + 24) << "\" y=\"" << num(y) << "\">" << escape(scale_stops_[i].second) << "</text>\n";
  }
  out << "</g>\n</svg>\n";
}

void page_begin(std::ostream& out, std::string_view title) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape(title) << "</title>\n"
      << "<style>body{font-family:sans-serif;margin:2em;max-width:1000px}h2{margin-top:2em}"
         "table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}"
         "td.n{text-align:right;white-space:nowrap}figure{margin:1em 0}p.note{color:#555}div.wide{overflow-x:auto}</style>\n</head><body>\n"
      << "<h1>" << escape(title) << "</h1>\n";
}

void page_end(std::ostream& out) {
  // Counts the charts that laid out with at least one data mark: what a headless browser reads back.
  out << "<script>window.addEventListener('load',function(){var c=document.querySelectorAll('svg.chart'),n=0;"
         "c.forEach(function(s){var b=s.getBBox();if(b.width>0&&b.height>0&&s.querySelector('.mark'))n++;});"
         "document.body.setAttribute('data-charts',c.length);document.body.setAttribute('data-rendered',n);});</script>\n"
         "</body></html>\n";
}

}  // namespace fleetsim::html
