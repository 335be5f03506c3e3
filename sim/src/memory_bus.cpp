#include "memory_bus.hpp"

#include <algorithm>
#include <limits>

namespace fleetsim {

MemoryBus::MemoryBus(std::vector<double> bus_Bps) : bus_Bps_(std::move(bus_Bps)), on_node_(bus_Bps_.size()) {
  any_ = std::any_of(bus_Bps_.begin(), bus_Bps_.end(), [](double b) { return b > 0; });
}

// Brings the jobs on these nodes up to now at their old paces; `changed` lists them once each.
void MemoryBus::advance(std::span<const NodeId> nodes, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  for (NodeId n : nodes) changed.insert(changed.end(), on_node_[index(n)].begin(), on_node_[index(n)].end());
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (std::uint32_t t : changed) jobs_.at(t).paced.advance(now_s);
}

// Max-min over the node's devices, each drawing at most its demand: the smallest demands are met
// whole while they are below an even share of what is left; the rest split what remains.
void MemoryBus::share(NodeId node) {
  order_ = on_node_[index(node)];
  std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    const double da = jobs_.at(a).demand_Bps, db = jobs_.at(b).demand_Bps;
    return da < db || (da == db && a < b);
  });
  const auto here = [&](Job& j) -> Share& { return *std::find_if(j.nodes.begin(), j.nodes.end(), [&](const Share& s) { return s.node == node; }); };
  double left = bus_Bps_[index(node)];
  double devices = 0;
  for (std::uint32_t t : order_) devices += here(jobs_.at(t)).devices;
  for (std::uint32_t t : order_) {
    Job& j = jobs_.at(t);
    Share& s = here(j);
    s.rate_Bps = std::min(j.demand_Bps, left / devices);
    left = std::max(0.0, left - s.rate_Bps * s.devices);
    devices -= s.devices;
  }
}

// A job's rate is its least over its nodes; given r below its demand, its core stretches to bytes / r.
void MemoryBus::repace(const std::vector<std::uint32_t>& changed) {
  for (std::uint32_t t : changed) {
    Job& j = jobs_.at(t);
    j.rate_Bps = std::numeric_limits<double>::infinity();
    for (const Share& s : j.nodes) j.rate_Bps = std::min(j.rate_Bps, s.rate_Bps);
    const bool throttled = j.work.bytes > 0 && j.rate_Bps < j.demand_Bps;
    j.paced.pace = throttled ? j.paced.work_s / (j.work.launch_s + std::max(j.work.core_s, j.work.bytes / j.rate_Bps)) : 1;
  }
}

void MemoryBus::start(std::uint32_t task, std::span<const NodeId> devices, Work work, double now_s, std::vector<std::uint32_t>& changed) {
  Job j;
  for (NodeId n : devices) {
    const auto it = std::find_if(j.nodes.begin(), j.nodes.end(), [&](const Share& s) { return s.node == n; });
    if (it == j.nodes.end()) {
      j.nodes.push_back({n, 1, std::numeric_limits<double>::infinity()});
    } else {
      ++it->devices;
    }
  }
  std::vector<NodeId> touched;
  for (const Share& s : j.nodes) touched.push_back(s.node);
  advance(touched, now_s, changed);
  j.work = work;
  j.demand_Bps = work.core_s > 0 ? work.bytes / work.core_s : 0;
  j.paced = PacedWork::starting(work.launch_s + work.core_s, now_s);
  for (NodeId n : touched) {
    if (on(n)) on_node_[index(n)].push_back(task);
  }
  jobs_[task] = std::move(j);
  changed.insert(std::upper_bound(changed.begin(), changed.end(), task), task);
  for (NodeId n : touched) {
    if (on(n)) share(n);
  }
  repace(changed);
}

void MemoryBus::stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  const auto it = jobs_.find(task);
  if (it == jobs_.end()) return;
  std::vector<NodeId> touched;
  for (const Share& s : it->second.nodes) touched.push_back(s.node);
  jobs_.erase(it);
  for (NodeId n : touched) std::erase(on_node_[index(n)], task);
  advance(touched, now_s, changed);
  for (NodeId n : touched) {
    if (on(n)) share(n);
  }
  repace(changed);
}

double MemoryBus::done_s(std::uint32_t task, double now_s) const { return jobs_.at(task).paced.done_s(now_s); }

double MemoryBus::reaches_s(std::uint32_t task, double left_s) const { return jobs_.at(task).paced.reaches_s(left_s); }

}  // namespace fleetsim
