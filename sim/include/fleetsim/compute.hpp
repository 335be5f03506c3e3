// Compute time of a task on one GPU, from a roofline: launch overhead plus the larger of the
// FLOP time at the dtype's peak and the memory-traffic time at the HBM bandwidth (their sum on a
// device that runs them back to back). The breakdown says why a task took as long as it did.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fleetsim/catalog.hpp"

namespace fleetsim {

struct ComputeEstimate {
  double launch_s = 0;
  double flop_s = 0;    // FLOP / peak
  double memory_s = 0;  // bytes / bandwidth
  bool sequential = false;
  double total_s() const { return launch_s + (sequential ? flop_s + memory_s : std::max(flop_s, memory_s)); }
  bool memory_bound() const { return memory_s > flop_s; }
};

ComputeEstimate estimate_compute(const GpuType& gpu, double flop, double bytes, Dtype dtype,
                                 std::uint32_t launches);

}  // namespace fleetsim
