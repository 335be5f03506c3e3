// The cluster of one run: nodes and GPUs numbered densely from the scenario's node groups, and the
// route between any two GPUs. Routes here are point to point (latency summed over hops, bandwidth
// of the slowest hop); contention between transfers is the network model's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fleetsim/ids.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {

struct Route {
  double bandwidth_Bps = 0;  // of the slowest hop; infinite on the same GPU
  double latency_s = 0;      // summed over hops
  std::uint32_t hops = 0;
};

class Cluster {
 public:
  explicit Cluster(const ClusterSpec& spec);

  std::uint32_t gpu_count() const { return static_cast<std::uint32_t>(gpu_node_.size()); }
  std::uint32_t node_count() const { return static_cast<std::uint32_t>(node_group_.size()); }
  NodeId node_of(GpuId gpu) const { return gpu_node_[index(gpu)]; }
  GpuId first_gpu(NodeId node) const { return node_first_gpu_[index(node)]; }
  std::uint32_t gpus_in(NodeId node) const { return group(node).node.gpus; }
  const NodeGroup& group(NodeId node) const { return spec_.groups[node_group_[index(node)]]; }
  const GpuType& gpu_type(GpuId gpu) const { return group(node_of(gpu)).gpu; }

  // "n3.g5": GPU 5 of node 3.
  std::string gpu_name(GpuId gpu) const;
  Route route(GpuId from, GpuId to) const;
  // Latency plus bytes over the route's bandwidth; zero on the same GPU.
  double transfer_time_s(GpuId from, GpuId to, double bytes) const;

 private:
  ClusterSpec spec_;
  std::vector<NodeId> gpu_node_;
  std::vector<std::uint32_t> node_group_;
  std::vector<GpuId> node_first_gpu_;
};

}  // namespace fleetsim
