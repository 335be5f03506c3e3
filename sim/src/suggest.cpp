#include "fleetsim/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace fleetsim {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance: Levenshtein with adjacent transpositions.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
  if (name.size() > 64) return "";  // no name of the catalog is that long; and the table stays small
  const std::size_t limit = std::clamp<std::size_t>(name.size() / 3, 1, 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  bool tie = false;
  for (const std::string& k : known) {
    if (k.size() > name.size() + limit || k.size() + limit < name.size()) continue;
    const std::size_t dist = distance(name, k);
    if (dist < best_distance) {
      best = k;
      best_distance = dist;
      tie = false;
    } else if (dist == best_distance && k != best) {
      tie = true;
    }
  }
  return best_distance <= limit && !tie && best != name ? best : "";
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const std::string best = closest_name(name, known);
  return best.empty() ? "" : "; did you mean \"" + best + "\"?";
}

}  // namespace fleetsim
