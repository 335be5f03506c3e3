#include "fifo.hpp"

#include "fleetsim/cluster.hpp"

namespace fleetsim::policies {

void Fifo::schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) {
  taken_.assign(view.cluster().gpu_count(), 0);
  for (std::size_t i = 0; i < ready.size(); ++i) {
    if (!place(view, ready[i], i, out)) break;
  }
}

bool Fifo::place(const ClusterView& view, const ReadyTask& task, std::size_t ready_index, Decisions& out) {
  const Cluster& cluster = view.cluster();
  auto usable = [&](GpuId g) {
    return taken_[index(g)] == 0 && view.is_free(g) && view.fits(g, task);
  };
  auto collect = [&](NodeId node) {
    const std::uint32_t first = index(cluster.first_gpu(node));
    for (std::uint32_t g = first; g < first + cluster.gpus_in(node) && chosen_.size() < task.gpus; ++g) {
      if (usable(make_id<GpuId>(g))) chosen_.push_back(make_id<GpuId>(g));
    }
  };
  chosen_.clear();
  // One node with room for the whole gang first: NVLink inside a node beats the network.
  for (std::uint32_t n = 0; n < cluster.node_count() && chosen_.size() < task.gpus; ++n) {
    const NodeId node = make_id<NodeId>(n);
    if (view.free_gpus(node) < task.gpus) continue;
    chosen_.clear();
    collect(node);
  }
  if (chosen_.size() < task.gpus) {
    chosen_.clear();
    for (std::uint32_t n = 0; n < cluster.node_count() && chosen_.size() < task.gpus; ++n) {
      if (view.free_gpus(make_id<NodeId>(n)) > 0) collect(make_id<NodeId>(n));
    }
  }
  if (chosen_.size() < task.gpus) return false;
  for (GpuId g : chosen_) taken_[index(g)] = 1;
  out.place(ready_index, chosen_);
  return true;
}

}  // namespace fleetsim::policies
