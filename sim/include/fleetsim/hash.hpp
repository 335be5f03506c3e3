// The one hash mixer, for random stream seeds, equal-cost route picks and the event digest.
#pragma once

#include <cstdint>

namespace fleetsim {

// SplitMix64's finalizer: a bijection that spreads every input bit over the output.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Folds a value into a running hash.
constexpr std::uint64_t hash_combine(std::uint64_t hash, std::uint64_t value) { return splitmix64(hash ^ splitmix64(value)); }

}  // namespace fleetsim
