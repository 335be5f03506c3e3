// Pools whose slots are given back and reused, so that steady state allocates nothing.
#pragma once

#include <cstddef>
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

// How many records the run has made, and the most it will make: tables an instance or a task grow as
// instances arrive, and reserve the most once (no table is copied as it grows, none holds room twice).
struct RecordCounts {
  std::size_t tasks = 0, instances = 0;
  std::size_t most_tasks = 0, most_instances = 0;
};

// Grows a table a task (or an instance) to `size` entries, new ones `fill`.
template <typename T>
void grow(std::vector<T>& table, std::size_t size, std::size_t most, const T& fill) {
  if (table.capacity() < most) table.reserve(most);
  table.resize(size, fill);
}

}  // namespace fleetsim::run
