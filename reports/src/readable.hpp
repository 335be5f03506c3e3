// Numbers as people read them in tables and charts: no exponents for ordinary magnitudes, and times in
// the unit that suits them.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "fleetsim/units.hpp"

namespace fleetsim {

// `digits` significant digits, or a whole number where that would take an exponent (12345, not 1.23e+04).
inline std::string readable(double x, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*g", digits, x);
  if (std::abs(x) >= 1 && std::string_view(text).find('e') != std::string_view::npos) std::snprintf(text, sizeof text, "%.0f", x);
  return text;
}

// Money: cents below $1,000, whole dollars with thousands separators from there ("$3.01", "$10,475,497").
inline std::string dollars(double usd) {
  if (std::abs(usd) < 999.995) {
    char text[48];
    std::snprintf(text, sizeof text, "$%.2f", usd);
    return text;
  }
  return "$" + format_number(usd);
}

// The unit for seconds whose largest magnitude is `largest_s`: s, min, h or days, and its length in seconds.
struct TimeUnit {
  const char* name;
  double seconds;
};
// Seconds up to 1,000, minutes up to 300, hours up to 100: at most four digits before the point.
inline TimeUnit time_unit_for(double largest_s) {
  if (largest_s >= 100 * 3600) return {"days", 86400};
  if (largest_s >= 300 * 60) return {"h", 3600};
  if (largest_s >= 1000) return {"min", 60};
  return {"s", 1};
}

}  // namespace fleetsim
