#include "greedy.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "fleetsim/cluster.hpp"

namespace fleetsim::policies {

void Greedy::schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) {
  taken_.assign(view.cluster().gpu_count(), 0);
  order_.resize(ready.size());
  std::iota(order_.begin(), order_.end(), 0u);
  order(view, ready, order_);
  begin_round(view);
  for (std::uint32_t i : order_) {
    if (!allowed(view, ready[i])) continue;
    if (place(view, ready[i], i, out)) continue;
    if (blocks()) break;
    blocked(view, ready[i]);
  }
}

bool Greedy::place(const ClusterView& view, const ReadyTask& task, std::size_t ready_index, Decisions& out) {
  const Cluster& cluster = view.cluster();
  auto usable = [&](GpuId g) { return taken_[index(g)] == 0 && view.is_free(g) && view.fits(g, task); };
  auto gather = [&](NodeId node) {
    const std::uint32_t first = index(cluster.first_gpu(node));
    for (std::uint32_t g = first; g < first + cluster.gpus_in(node); ++g) {
      const GpuId gpu = make_id<GpuId>(g);
      if (usable(gpu)) candidates_.push_back(Candidate{cost(view, task, gpu), gpu});
    }
  };
  // The cheapest k GPUs of candidates_, and their total cost.
  auto cheapest = [&](std::size_t k) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k), candidates_.end());
    Cost total{};
    for (std::size_t i = 0; i < k; ++i) {
      for (std::size_t j = 0; j < total.size(); ++j) total[j] += candidates_[i].cost[j];
    }
    return total;
  };

  // One node with room for the whole gang first: NVLink inside a node beats the network.
  const std::size_t k = task.gpus;
  const double inf = std::numeric_limits<double>::infinity();
  Cost best{inf, inf, inf};
  chosen_.clear();
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeId node = make_id<NodeId>(n);
    if (view.free_gpus(node) < k) continue;
    candidates_.clear();
    gather(node);
    if (candidates_.size() < k) continue;
    const Cost total = cheapest(k);
    if (total < best) {
      best = total;
      chosen_.clear();
      for (std::size_t i = 0; i < k; ++i) chosen_.push_back(candidates_[i].gpu);
    }
  }
  if (chosen_.empty()) {
    candidates_.clear();
    for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
      if (view.free_gpus(make_id<NodeId>(n)) > 0) gather(make_id<NodeId>(n));
    }
    if (candidates_.size() < k) return false;
    cheapest(k);
    for (std::size_t i = 0; i < k; ++i) chosen_.push_back(candidates_[i].gpu);
  }
  for (GpuId g : chosen_) taken_[index(g)] = 1;
  out.place(ready_index, chosen_);
  return true;
}

}  // namespace fleetsim::policies
