#include "counting_walk.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "fleetsim/cluster.hpp"

namespace fleetsim::policies {

// Nodes go together when the same tenants may use them; the tenants' nodes split the cluster when
// every tenant's nodes lie in one such group. Found once (again if the cluster grows).
void CountingWalk::find_parts(const ClusterView& view) {
  const Cluster& cluster = view.cluster();
  cluster_ = &cluster;
  const std::uint32_t nodes = cluster.node_count(), tenants = view.tenant_count();
  node_part_.assign(nodes, 0);
  tenant_part_.assign(tenants, 0);
  tenant_gpus_.assign(tenants, 0);
  std::map<std::string, std::uint32_t> parts;  // by the node's users, a character per tenant
  std::string users(tenants, '0');
  for (std::uint32_t n = 0; n < nodes; ++n) {
    for (std::uint32_t t = 0; t < tenants; ++t) {
      const bool may = view.tenant_may_use(make_id<TenantId>(t), make_id<NodeId>(n));
      users[t] = may ? '1' : '0';
      if (may) tenant_gpus_[t] += cluster.gpus_in(make_id<NodeId>(n));
    }
    node_part_[n] = parts.emplace(users, static_cast<std::uint32_t>(parts.size())).first->second;
  }
  constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  std::vector<std::uint32_t> part_of(tenants, kNone);
  bool split = parts.size() > 1;
  for (std::uint32_t n = 0; n < nodes && split; ++n) {
    for (std::uint32_t t = 0; t < tenants; ++t) {
      if (!view.tenant_may_use(make_id<TenantId>(t), make_id<NodeId>(n))) continue;
      if (part_of[t] == kNone) part_of[t] = node_part_[n];
      if (part_of[t] != node_part_[n]) split = false;  // a tenant crosses parts: count the cluster as one
    }
  }
  if (!split) node_part_.assign(nodes, 0);
  for (std::uint32_t t = 0; t < tenants && split; ++t) tenant_part_[t] = part_of[t] == kNone ? 0 : part_of[t];
  budget_.assign(split ? parts.size() : 1, 0);
}

void CountingWalk::begin_walk(const ClusterView& view, bool suspending) {
  if (cluster_ != &view.cluster() || node_part_.size() != view.cluster().node_count()) find_parts(view);
  ++walk_;
  held_back_ = false;
  reserved_.assign(budget_.size(), 0);
  allowed_order_.clear();
  if (budget_.size() == 1) {
    budget_[0] = view.free_gpu_count();
  } else {
    std::fill(budget_.begin(), budget_.end(), 0);
    for (std::uint32_t n = 0; n < node_part_.size(); ++n) budget_[node_part_[n]] += view.free_gpus(make_id<NodeId>(n));
  }
  // The GPUs running jobs hold: counted in when suspending; a reserving walk needs them to know what is up.
  const auto add_running = [&](std::vector<std::uint32_t>& per_part) {
    if (per_part.size() == 1) {
      for (const RunningTask& r : view.running()) per_part[0] += r.gpus;
    } else {
      for (const RunningTask& r : view.running()) per_part[part_of(r)] += r.gpus;
    }
  };
  if (suspending) add_running(budget_);
  if (reserving_) {
    up_ = budget_;
    if (!suspending) add_running(up_);
  }
  open_parts_ = static_cast<std::uint32_t>(std::count_if(budget_.begin(), budget_.end(), [](std::uint32_t b) { return b > 0; }));
}

std::uint32_t CountingWalk::part_of(const RunningTask& r) const { return node_part_[index(cluster_->node_of(r.first_gpu))]; }

std::uint32_t CountingWalk::walk_waiting_from(std::span<const ReadyTask> ready, std::uint32_t from, double before_s) {
  std::uint32_t i = from;
  while (i < ready.size() && ready[i].ready_s < before_s && !walk_done()) walk_waiting(ready, i++);
  return i;
}

void CountingWalk::allow(std::uint32_t part, const ReadyTask& t, std::uint32_t i) {
  take(part, t.gpus);
  if (index(t.task) >= allowed_walk_.size()) allowed_walk_.resize(index(t.task) + 1, 0);
  allowed_walk_[index(t.task)] = walk_;
  allowed_order_.push_back(i);
}

}  // namespace fleetsim::policies
