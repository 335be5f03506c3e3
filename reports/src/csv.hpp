// CSV fields as RFC 4180 wants them: quoted when they hold a comma, a quote or a line break.
#pragma once

#include <string>

namespace fleetsim {

inline std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace fleetsim
