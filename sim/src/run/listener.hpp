// Optional features attach to a run through these calls instead of `if (feature)` checks inline: the
// run tells every listener it owns what happened, in the order they were added.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fleetsim/ids.hpp"
#include "fleetsim/policy.hpp"

namespace fleetsim::run {

class RunListener {
 public:
  virtual ~RunListener() = default;
  // Something left the GPU: a task's share of it, or an output tensor it held for a consumer.
  virtual void gpu_released(std::uint32_t /*gpu*/) {}
  // A task was placed on its GPUs.
  virtual void task_started(TaskId /*task*/) {}
  // A scheduling round: before the policy sees the ready queue (which a listener may adjust), and after
  // its decisions were carried out (the tasks left waiting).
  virtual void round_begins(std::span<ReadyTask> /*ready*/) {}
  virtual void round_ends(std::span<const ReadyTask> /*ready*/) {}
};

}  // namespace fleetsim::run
