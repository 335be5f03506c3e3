// Model weights loaded onto GPUs. A load comes from host memory (from the node's storage the first
// time, when the cluster has storage), or from a peer GPU of the node that holds the weights when its
// route is at least as fast. Host memory keeps what was read from storage until the node fails or goes
// off. Each load is recorded in the trace; its flow is the run's to start.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim::run {

class WeightLoads {
 public:
  WeightLoads(const Cluster& cluster, const Topology& topology, GpuMemory& memory, Trace& trace);

  // A load of `model` (`bytes`) onto GPU `g` for `task`, carried by the flow tagged `tag`; returns the
  // topology vertex it comes from.
  std::uint32_t begin(std::uint64_t tag, TaskId task, GpuId g, std::uint32_t model, double bytes, double now_s);
  // Its flow was delivered: the weights are resident on the GPU.
  void delivered(std::uint64_t tag, std::uint32_t model, double now_s);
  // Its flow was cancelled (the task stopped): the load ends, partial. Returns the GPU it was for.
  GpuId cancelled(std::uint64_t tag, double now_s);
  // The node's host memory is gone (a failure, or the node turned off).
  void host_lost(NodeId node) { host_models_[index(node)].clear(); }
  bool in_host(NodeId node, std::uint32_t model) const;

 private:
  WeightLoad& take(std::uint64_t tag, double now_s);

  const Cluster& cluster_;
  const Topology& topology_;
  GpuMemory& memory_;
  Trace& trace_;
  std::vector<std::vector<std::uint32_t>> host_models_;         // per node: models its host memory holds
  std::unordered_map<std::uint64_t, std::uint32_t> loading_;   // flow tag -> its load in trace_.weight_loads
  std::vector<std::uint32_t> route_;                           // scratch
};

}  // namespace fleetsim::run
