// The cluster of one run: nodes and GPUs numbered densely from the scenario's node groups.
// How they are wired is the Topology's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fleetsim/ids.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {

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
  const ClusterSpec& spec() const { return spec_; }

  // "n3.g5": GPU 5 of node 3; "n3.g5.m2": its MIG instance 2.
  std::string gpu_name(GpuId gpu) const;

 private:
  ClusterSpec spec_;
  std::vector<NodeId> gpu_node_;
  std::vector<std::uint32_t> node_group_;
  std::vector<GpuId> node_first_gpu_;
};

}  // namespace fleetsim
