#include "fleetsim/cluster.hpp"


namespace fleetsim {

Cluster::Cluster(const ClusterSpec& spec) : spec_(spec) {
  for (std::uint32_t g = 0; g < spec_.groups.size(); ++g) {
    for (int n = 0; n < spec_.groups[g].count; ++n) {
      const NodeId node = make_id<NodeId>(node_group_.size());
      node_group_.push_back(g);
      node_first_gpu_.push_back(make_id<GpuId>(gpu_node_.size()));
      gpu_node_.insert(gpu_node_.end(), static_cast<std::size_t>(spec_.groups[g].node.gpus), node);
    }
  }
}

std::string Cluster::gpu_name(GpuId gpu) const {
  const NodeId node = node_of(gpu);
  const std::uint32_t local = index(gpu) - index(first_gpu(node));
  const auto slices = static_cast<std::uint32_t>(group(node).mig_slices);
  const std::string name = "n" + std::to_string(index(node)) + ".g" + std::to_string(local / slices);
  return slices == 1 ? name : name + ".m" + std::to_string(local % slices);
}

}  // namespace fleetsim
