// Deterministic random streams. Each stream is derived from (seed, run, stream name) with a fixed
// hash, so adding a stream never shifts another, and the distributions are written here because the
// standard library's differ between implementations.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

#include "fleetsim/hash.hpp"

namespace fleetsim {

std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t run, std::string_view stream);

class Rng {
 public:
  Rng(std::uint64_t seed, std::uint64_t run, std::string_view stream)
      : engine_(stream_seed(seed, run, stream)) {}

  std::uint64_t next() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Exponential with the given rate (mean 1/rate).
  double exponential(double rate);

 private:
  std::mt19937_64 engine_;
};

}  // namespace fleetsim
