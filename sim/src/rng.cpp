#include "fleetsim/rng.hpp"

#include <cmath>

namespace fleetsim {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t run, std::string_view stream) {
  return splitmix64(splitmix64(splitmix64(seed) ^ run) ^ fnv1a(stream));
}

std::uint64_t hash_combine(std::uint64_t hash, std::uint64_t value) { return splitmix64(hash ^ splitmix64(value)); }

double Rng::exponential(double rate) {
  // 1 - u lies in (0, 1], so the log is finite.
  return -std::log1p(-uniform()) / rate;
}

}  // namespace fleetsim
