#include "fleetsim/cluster.hpp"

#include <algorithm>
#include <limits>

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
  return "n" + std::to_string(index(node)) + ".g" + std::to_string(index(gpu) - index(first_gpu(node)));
}

Route Cluster::route(GpuId from, GpuId to) const {
  Route r;
  if (from == to) {
    r.bandwidth_Bps = std::numeric_limits<double>::infinity();
    return r;
  }
  const NodeGroup& a = group(node_of(from));
  if (node_of(from) == node_of(to)) {
    r.bandwidth_Bps = a.gpu_link.bandwidth_Bps;
    r.latency_s = a.gpu_link.latency_s;
    r.hops = 1;
    return r;
  }
  // GPU -> PCIe -> NIC -> switch -> NIC -> PCIe -> GPU (GPUDirect RDMA): four link hops.
  const NodeGroup& b = group(node_of(to));
  r.bandwidth_Bps = std::min({a.host_link.bandwidth_Bps, a.nic.bandwidth_Bps, b.nic.bandwidth_Bps,
                              b.host_link.bandwidth_Bps});
  r.latency_s = a.host_link.latency_s + a.nic.latency_s + b.nic.latency_s + b.host_link.latency_s;
  r.hops = 4;
  return r;
}

double Cluster::transfer_time_s(GpuId from, GpuId to, double bytes) const {
  if (from == to) return 0.0;
  const Route r = route(from, to);
  return r.latency_s + bytes / r.bandwidth_Bps;
}

}  // namespace fleetsim
