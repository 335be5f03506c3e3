// "Did you mean" for a misspelt name: the one known name a few edits away, if there is one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fleetsim {

// The known name closest to `name` by edit distance (insertions, deletions, substitutions and swaps of
// neighbours, letters compared without case), if it is within a third of the name's length (at least 1,
// at most 3 edits) and no other name is as close; "" otherwise.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);
// "; did you mean \"hgx-h100-8\"?" for closest_name, or "" where there is none: to end a message with.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);
// The same over the keys of a map (the catalog's GPU, node and architecture tables).
template <class Map>
std::string did_you_mean_key(std::string_view name, const Map& table) {
  std::vector<std::string> keys;
  for (const auto& entry : table) keys.push_back(entry.first);
  return did_you_mean(name, keys);
}

}  // namespace fleetsim
