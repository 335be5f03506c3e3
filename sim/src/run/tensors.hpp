// The tensors on a workflow's edges. A task's outputs stay in its first GPU's VRAM (as far as cached
// models can be evicted for them; the rest spills to host memory) until each consumer has read its
// own, and a task is ready once every input has been produced. A failed GPU loses what it held: the
// consumers that had not read it cannot run (no lineage: producers are not run again).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "fleetsim/memory.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "slots.hpp"
#include "workload.hpp"

namespace fleetsim::run {

class Tensors {
 public:
  // `freed` is told each time a tensor leaves a GPU's VRAM.
  Tensors(const Scenario& scenario, const Trace& trace, const Workload& workload, GpuMemory& memory,
          std::function<void(GpuId)> freed);
  // The instances that arrived since the last call: their edges and their tasks' inputs.
  void size_tasks(const RecordCounts& n);

  // The task ended: its outputs are held on its first GPU. Returns the consumers it was the last
  // input of that wait to be made ready, in edge order.
  const std::vector<TaskId>& produced(TaskId task, double now_s);
  // The GPU holding the output on the instance's edge `edge` (its producer's first).
  GpuId holder(std::uint32_t instance, std::uint32_t edge) const;
  // The consumer has read it (or never will): its holder lets it go.
  void release(std::uint32_t instance, std::uint32_t edge, double now_s);
  // A task failed before it ran: the inputs it would have read are let go.
  void release_inputs(TaskId task, double now_s);
  // The GPU failed: every tensor on it is gone. `lost(consumer, producer)` is called, as it goes, for each
  // one a queued consumer had not read.
  void lose(GpuId gpu, const std::function<void(TaskId consumer, TaskId producer)>& lost);

 private:
  double& held(std::uint32_t instance, std::uint32_t edge) { return held_[first_edge_[instance] + edge]; }

  const Scenario& sc_;
  const Trace& trace_;
  const Workload& workload_;
  GpuMemory& memory_;
  std::function<void(GpuId)> freed_;
  std::vector<std::uint32_t> inputs_left_;  // per task: inputs not yet produced
  std::vector<std::uint32_t> first_edge_;   // per instance: its first edge's offset into held_
  std::vector<double> held_;                // per instance edge: bytes held in the producer's VRAM
  std::vector<TaskId> ready_;               // scratch: consumers made ready
};

}  // namespace fleetsim::run
