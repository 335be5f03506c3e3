#include "fleetsim/units.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace fleetsim {
namespace {

struct Unit {
  std::string_view symbol;
  double factor;
};

constexpr std::array kByteUnits{
    Unit{"B", 1.0},       Unit{"kB", 1e3},           Unit{"KB", 1e3},
    Unit{"MB", 1e6},      Unit{"GB", 1e9},           Unit{"TB", 1e12},
    Unit{"PB", 1e15},     Unit{"KiB", 1024.0},       Unit{"MiB", 1048576.0},
    Unit{"GiB", 1073741824.0}, Unit{"TiB", 1099511627776.0}, Unit{"PiB", 1125899906842624.0},
    Unit{"b", 0.125},     Unit{"kb", 1e3 / 8},       Unit{"Kb", 1e3 / 8},
    Unit{"Mb", 1e6 / 8},  Unit{"Gb", 1e9 / 8},       Unit{"Tb", 1e12 / 8},
};

constexpr std::array kFlopUnits{
    Unit{"FLOP", 1.0},    Unit{"kFLOP", 1e3},  Unit{"MFLOP", 1e6},  Unit{"GFLOP", 1e9},
    Unit{"TFLOP", 1e12},  Unit{"PFLOP", 1e15}, Unit{"EFLOP", 1e18},
};

constexpr std::array kTimeUnits{
    Unit{"ns", 1e-9}, Unit{"us", 1e-6}, Unit{"\xC2\xB5s", 1e-6}, Unit{"ms", 1e-3},
    Unit{"s", 1.0},   Unit{"min", 60.0}, Unit{"h", 3600.0},      Unit{"d", 86400.0}, Unit{"days", 86400.0},
};

constexpr std::array kPowerUnits{Unit{"W", 1.0}, Unit{"kW", 1e3}, Unit{"MW", 1e6}};

template <std::size_t N>
bool lookup(const std::array<Unit, N>& units, std::string_view symbol, double& factor) {
  for (const Unit& u : units) {
    if (u.symbol == symbol) {
      factor = u.factor;
      return true;
    }
  }
  return false;
}

bool strip_suffix(std::string_view& s, std::string_view suffix) {
  if (s.size() < suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  s.remove_suffix(suffix.size());
  return true;
}

bool unit_factor(std::string_view unit, Dimension dim, double& factor) {
  switch (dim) {
    case Dimension::bytes:
      return lookup(kByteUnits, unit, factor);
    case Dimension::bandwidth:
      return strip_suffix(unit, "/s") && lookup(kByteUnits, unit, factor);
    case Dimension::flop:
      return lookup(kFlopUnits, unit, factor);
    case Dimension::flop_rate:
      if (strip_suffix(unit, "/s")) return lookup(kFlopUnits, unit, factor);
      return strip_suffix(unit, "S") && lookup(kFlopUnits, unit, factor);
    case Dimension::time:
      return lookup(kTimeUnits, unit, factor);
    case Dimension::power:
      return lookup(kPowerUnits, unit, factor);
    case Dimension::rate:
      if (unit == "Hz") {
        factor = 1.0;
        return true;
      }
      if (unit.empty() || unit.front() != '/') return false;
      unit.remove_prefix(1);
      if (!lookup(kTimeUnits, unit, factor)) return false;
      factor = 1.0 / factor;
      return true;
  }
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view dimension_example(Dimension dim) {
  switch (dim) {
    case Dimension::bytes: return "a size such as \"80 GiB\" or \"512 MB\"";
    case Dimension::bandwidth: return "a bandwidth such as \"900 GB/s\" or \"400 Gb/s\"";
    case Dimension::flop: return "an amount of work such as \"1.5 TFLOP\"";
    case Dimension::flop_rate: return "a compute rate such as \"989 TFLOP/s\"";
    case Dimension::time: return "a duration such as \"2.5 ms\" or \"1 h\"";
    case Dimension::power: return "a power such as \"700 W\"";
    case Dimension::rate: return "a rate such as \"0.5 /s\" or \"120 /h\"";
  }
  return "a quantity";
}

std::optional<double> parse_number(std::string_view text) {
  double x = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

double parse_quantity(std::string_view text, Dimension dim) {
  const std::string_view s = trim(text);
  auto fail = [&](std::string_view why) -> double {
    std::string msg = "expected ";
    msg += dimension_example(dim);
    msg += ", found \"";
    msg += text;
    msg += "\"";
    if (!why.empty()) {
      msg += " (";
      msg += why;
      msg += ")";
    }
    throw UnitError(msg);
  };

  double number = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), number);
  if (ec == std::errc::result_out_of_range) return fail("out of range");
  if (ec != std::errc{} || end == s.data()) return fail("no number");
  if (!std::isfinite(number)) return fail("not finite");
  if (std::signbit(number)) return fail("must not be negative");
  const std::string_view unit = trim(s.substr(static_cast<std::size_t>(end - s.data())));
  if (unit.empty()) return fail("missing unit");
  double factor = 0.0;
  if (!unit_factor(unit, dim, factor)) return fail("unknown unit \"" + std::string(unit) + "\"");
  const double value = number * factor;
  if (!std::isfinite(value)) return fail("out of range");
  return value;
}

std::string format_quantity(double value, Dimension dim) {
  struct Scale {
    double factor;
    const char* symbol;
  };
  auto pick = [&](std::initializer_list<Scale> scales) {
    const Scale* chosen = scales.begin();
    for (const Scale& sc : scales) {
      if (std::fabs(value) >= sc.factor * 0.9995) chosen = &sc;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g %s", value / chosen->factor, chosen->symbol);
    return std::string(buf);
  };
  switch (dim) {
    case Dimension::bytes:
      return pick({{1, "B"}, {1e3, "kB"}, {1e6, "MB"}, {1e9, "GB"}, {1e12, "TB"}, {1e15, "PB"}});
    case Dimension::bandwidth:
      return pick({{1, "B/s"}, {1e3, "kB/s"}, {1e6, "MB/s"}, {1e9, "GB/s"}, {1e12, "TB/s"}});
    case Dimension::flop:
      return pick({{1, "FLOP"}, {1e9, "GFLOP"}, {1e12, "TFLOP"}, {1e15, "PFLOP"}, {1e18, "EFLOP"}});
    case Dimension::flop_rate:
      return pick({{1, "FLOP/s"}, {1e9, "GFLOP/s"}, {1e12, "TFLOP/s"}, {1e15, "PFLOP/s"}});
    case Dimension::time:
      if (value == 0.0) return "0 s";
      // Days from 100 hours on, so that no time needs an exponent before years.
      if (std::fabs(value) >= 100 * 3600) return pick({{86400, "days"}});
      return pick({{1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1, "s"}, {60, "min"}, {3600, "h"}});
    case Dimension::power:
      return pick({{1, "W"}, {1e3, "kW"}, {1e6, "MW"}});
    case Dimension::rate:
      return pick({{1, "/s"}});
  }
  return std::to_string(value);
}

std::string format_number(double value) {
  char text[64];
  if (!std::isfinite(value) || std::fabs(value) < 999.5) {
    if (value != 0 && std::fabs(value) < 1e-4) {  // where %g would write an exponent: as many decimals as 3 digits need
      const int decimals = 2 - static_cast<int>(std::floor(std::log10(std::fabs(value))));
      std::snprintf(text, sizeof text, "%.*f", std::min(decimals, 40), value);
    } else {
      std::snprintf(text, sizeof text, "%.3g", value);
    }
    return text;
  }
  std::snprintf(text, sizeof text, "%.0f", std::fabs(value));
  std::string digits(text), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

}  // namespace fleetsim
