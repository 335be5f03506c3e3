// Optional features attach to a run through these calls instead of `if (feature)` checks inline: the
// run tells every listener it owns what happened, in the order they were added.
#pragma once

#include <cstdint>

namespace fleetsim::run {

class RunListener {
 public:
  virtual ~RunListener() = default;
  // Something left the GPU: a task's share of it, or an output tensor it held for a consumer.
  virtual void gpu_released(std::uint32_t /*gpu*/) {}
};

}  // namespace fleetsim::run
