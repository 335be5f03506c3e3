#include "fleetsim/compute.hpp"

namespace fleetsim {

ComputeEstimate estimate_compute(const GpuType& gpu, double flop, double bytes, Dtype dtype,
                                 std::uint32_t launches) {
  ComputeEstimate e;
  e.launch_s = gpu.launch_overhead_s * launches;
  const double peak = gpu.peak_for(dtype);
  e.flop_s = flop > 0 ? flop / peak : 0.0;
  e.memory_s = bytes > 0 ? bytes / gpu.memory_bandwidth_Bps : 0.0;
  e.sequential = gpu.sequential_compute_and_memory;
  return e;
}

}  // namespace fleetsim
