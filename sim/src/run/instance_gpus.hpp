// One GPU an instance, as stock ComfyUI runs a prompt (scenario "instance_placement": "one-gpu"): the
// policy places an instance's first ready task; the GPU it gets is then held for the instance, out of
// every policy's sight, and the instance's other tasks run there one at a time, in the order they
// became ready, until its last task ends. Spread placement (the default) leaves every task to the policy.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fleetsim/ids.hpp"
#include "occupancy.hpp"

namespace fleetsim::run {

class InstanceGpus {
 public:
  InstanceGpus(bool on, Occupancy& occupancy) : on_(on), occupancy_(occupancy) {}
  bool on() const { return on_; }

  // A task of the instance is ready: true when it waits for the instance's GPU (held already, or about
  // to be: a task of the instance is with the policy) instead of joining the policy's queue.
  bool wait(std::uint32_t instance, TaskId task);
  // A task of the instance started on `gpu`; the instance's first holds that GPU for it from now on.
  void started(std::uint32_t instance, std::uint32_t gpu);
  // Each instance whose GPU is up and runs nothing, and that has a task waiting: its next task, taken off
  // the wait, to start there (in the order the instances first waited).
  std::vector<std::pair<TaskId, GpuId>> take_startable();
  // A task of the instance failed: the tasks waiting for its GPU, which fail with it (ComfyUI stops a
  // prompt at its first error).
  std::deque<TaskId> drop_waiting(std::uint32_t instance);
  // The instance has ended: its GPU goes back to the policies.
  void ended(std::uint32_t instance);

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  struct Held {
    std::uint32_t gpu = kNone;  // kNone while its first task is with the policy
    std::deque<TaskId> queue;   // ready, waiting for the GPU
  };
  bool on_;
  Occupancy& occupancy_;
  std::unordered_map<std::uint32_t, Held> held_;  // per instance in flight
  std::vector<std::uint32_t> waiting_;            // instances with a task waiting
};

}  // namespace fleetsim::run
