// Tasks holding a GPU at once (a batch, co-runners on a time-sliced GPU) are drawn on lanes of the
// GPU's row or track, so that their bars do not cover each other and trace slices nest.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fleetsim/trace.hpp"

namespace fleetsim {

struct GpuLanes {
  std::vector<std::uint32_t> lane;      // per entry of Trace::gpus: 0 unless another task held the GPU then
  std::vector<std::uint32_t> per_gpu;   // lanes each GPU needed (1 for most)
};

// Each task takes the lowest lane free when it starts; a task running at end_s holds its lane to it.
GpuLanes gpu_lanes(const Trace& trace, std::uint32_t gpus, double end_s);

// The entry of Trace::gpus where the load's task holds the load's GPU, so the load is drawn on the
// task's lane; none when the task's last run is elsewhere (the load belonged to a stopped run).
std::optional<std::uint32_t> load_entry(const Trace& trace, const WeightLoad& load);

}  // namespace fleetsim
