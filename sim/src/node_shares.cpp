#include "node_shares.hpp"

#include <algorithm>
#include <limits>

namespace fleetsim {

NodeShares::NodeShares(std::vector<Capacity> nodes) : on_node_(nodes.size()) {
  for (const Capacity& c : nodes) {
    capacity_.push_back({c.bus_Bps, c.compute_devices});
    any_ = any_ || on(make_id<NodeId>(static_cast<std::uint32_t>(capacity_.size() - 1)));
  }
}

// Brings the jobs on these nodes up to now at their old paces; `changed` lists them once each.
void NodeShares::advance(std::span<const NodeId> nodes, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  for (NodeId n : nodes) changed.insert(changed.end(), on_node_[index(n)].begin(), on_node_[index(n)].end());
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (std::uint32_t t : changed) jobs_.at(t).paced.advance(now_s);
}

// Max-min over the node's devices, each drawing at most its draw: the smallest draws are met whole
// while they are below an even share of what is left; the rest split what remains.
void NodeShares::share(NodeId node, Resource resource) {
  order_ = on_node_[index(node)];
  std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    const double da = jobs_.at(a).draw[resource], db = jobs_.at(b).draw[resource];
    return da < db || (da == db && a < b);
  });
  const auto here = [&](Job& j) -> Share& { return *std::find_if(j.nodes.begin(), j.nodes.end(), [&](const Share& s) { return s.node == node; }); };
  double left = capacity_[index(node)][resource];
  double devices = 0;
  for (std::uint32_t t : order_) devices += here(jobs_.at(t)).devices;
  for (std::uint32_t t : order_) {
    Job& j = jobs_.at(t);
    Share& s = here(j);
    s.given[resource] = std::min(j.draw[resource], left / devices);
    left = std::max(0.0, left - s.given[resource] * s.devices);
    devices -= s.devices;
  }
}

void NodeShares::share(NodeId node) {
  for (Resource r : {kBus, kCompute}) {
    if (capacity_[index(node)][r] > 0) share(node, r);
  }
}

// A job gets its least over its nodes; given less than it draws, its core stretches to what it needs
// over what it is given.
void NodeShares::repace(const std::vector<std::uint32_t>& changed) {
  for (std::uint32_t t : changed) {
    Job& j = jobs_.at(t);
    j.given.fill(std::numeric_limits<double>::infinity());
    for (const Share& s : j.nodes) {
      for (std::size_t r = 0; r < kResources; ++r) j.given[r] = std::min(j.given[r], s.given[r]);
    }
    const PerResource need{j.work.bytes, j.work.compute_s};
    double core_s = j.work.core_s;
    bool throttled = false;
    for (std::size_t r = 0; r < kResources; ++r) {
      if (need[r] > 0 && j.given[r] < j.draw[r]) {
        core_s = std::max(core_s, need[r] / j.given[r]);
        throttled = true;
      }
    }
    j.paced.pace = throttled ? j.paced.work_s / (j.work.launch_s + core_s) : 1;
  }
}

void NodeShares::start(std::uint32_t task, std::span<const NodeId> devices, Work work, double now_s, std::vector<std::uint32_t>& changed) {
  constexpr double kNotShared = std::numeric_limits<double>::infinity();
  Job j;
  for (NodeId n : devices) {
    const auto it = std::find_if(j.nodes.begin(), j.nodes.end(), [&](const Share& s) { return s.node == n; });
    if (it == j.nodes.end()) {
      j.nodes.push_back({n, 1, {kNotShared, kNotShared}});
    } else {
      ++it->devices;
    }
  }
  std::vector<NodeId> touched;
  for (const Share& s : j.nodes) touched.push_back(s.node);
  advance(touched, now_s, changed);
  j.work = work;
  if (work.core_s > 0) j.draw = {work.bytes / work.core_s, std::min(1.0, work.compute_s / work.core_s)};
  j.paced = PacedWork::starting(work.launch_s + work.core_s, now_s);
  for (NodeId n : touched) {
    if (on(n)) on_node_[index(n)].push_back(task);
  }
  jobs_[task] = std::move(j);
  changed.insert(std::upper_bound(changed.begin(), changed.end(), task), task);
  for (NodeId n : touched) share(n);
  repace(changed);
}

void NodeShares::stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  const auto it = jobs_.find(task);
  if (it == jobs_.end()) return;
  std::vector<NodeId> touched;
  for (const Share& s : it->second.nodes) touched.push_back(s.node);
  jobs_.erase(it);
  for (NodeId n : touched) std::erase(on_node_[index(n)], task);
  advance(touched, now_s, changed);
  for (NodeId n : touched) share(n);
  repace(changed);
}

double NodeShares::done_s(std::uint32_t task, double now_s) const { return jobs_.at(task).paced.done_s(now_s); }

double NodeShares::reaches_s(std::uint32_t task, double left_s) const { return jobs_.at(task).paced.reaches_s(left_s); }

}  // namespace fleetsim
