// Pools whose slots are given back and reused, so that steady state allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

namespace fleetsim::run {

// A slot of `pool` given back earlier (its index in `free`), or a new one.
template <typename T>
std::uint32_t take_slot(std::vector<T>& pool, std::vector<std::uint32_t>& free) {
  if (free.empty()) {
    pool.emplace_back();
    return static_cast<std::uint32_t>(pool.size() - 1);
  }
  const std::uint32_t slot = free.back();
  free.pop_back();
  return slot;
}

}  // namespace fleetsim::run
