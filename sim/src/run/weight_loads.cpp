#include "weight_loads.hpp"

#include <algorithm>

namespace fleetsim::run {

WeightLoads::WeightLoads(const Cluster& cluster, const Topology& topology, GpuMemory& memory, Trace& trace)
    : cluster_(cluster), topology_(topology), memory_(memory), trace_(trace), host_models_(cluster.node_count()) {}

bool WeightLoads::in_host(NodeId node, std::uint32_t model) const {
  const std::vector<std::uint32_t>& host = host_models_[index(node)];
  return std::find(host.begin(), host.end(), model) != host.end();
}

std::uint32_t WeightLoads::begin(std::uint64_t tag, TaskId task, GpuId g, std::uint32_t model, double bytes, double now_s) {
  const NodeId node = cluster_.node_of(g);
  std::uint32_t source = topology_.host_vertex(node);
  const auto storage = topology_.storage_vertex(node);
  if (storage && !in_host(node, model)) source = *storage;
  route_.clear();
  topology_.route(source, topology_.gpu_vertex(g), 0, route_);
  const double host_Bps = topology_.bottleneck_Bps(route_);
  const std::uint32_t first = index(cluster_.first_gpu(node));
  for (std::uint32_t p = first; p < first + cluster_.gpus_in(node); ++p) {
    if (p == index(g) || !memory_.loaded(make_id<GpuId>(p), model)) continue;
    route_.clear();
    topology_.route(topology_.gpu_vertex(make_id<GpuId>(p)), topology_.gpu_vertex(g), 0, route_);
    if (topology_.bottleneck_Bps(route_) >= host_Bps) {
      source = topology_.gpu_vertex(make_id<GpuId>(p));
      break;
    }
  }
  loading_[tag] = static_cast<std::uint32_t>(trace_.weight_loads.size());
  trace_.weight_loads.push_back({.task = task, .gpu = g,
                                 .peer = source < cluster_.gpu_count() ? std::optional(make_id<GpuId>(source)) : std::nullopt,
                                 .from_storage = storage && source == *storage,
                                 .bytes = bytes, .start_s = now_s});
  return source;
}

WeightLoad& WeightLoads::take(std::uint64_t tag, double now_s) {
  const auto load = loading_.find(tag);
  WeightLoad& w = trace_.weight_loads[load->second];
  w.end_s = now_s;
  loading_.erase(load);
  return w;
}

void WeightLoads::delivered(std::uint64_t tag, std::uint32_t model, double now_s) {
  const WeightLoad& w = take(tag, now_s);
  memory_.mark_loaded(w.gpu, model);
  const NodeId node = cluster_.node_of(w.gpu);
  if (w.from_storage && !in_host(node, model)) host_models_[index(node)].push_back(model);
}

GpuId WeightLoads::cancelled(std::uint64_t tag, double now_s) { return take(tag, now_s).gpu; }

}  // namespace fleetsim::run
