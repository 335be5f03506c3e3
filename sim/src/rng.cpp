#include "fleetsim/rng.hpp"

#include <cmath>

namespace fleetsim {
namespace {

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

double Rng::exponential(double rate) {
  // 1 - u lies in (0, 1], so the log is finite.
  return -std::log1p(-uniform()) / rate;
}

}  // namespace fleetsim
