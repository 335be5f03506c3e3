// What the devices of one node share: its memory bus (the CPU backend's workers share the machine's
// memory bandwidth) and its compute (workers on sibling hyperthreads, or cores under one power limit,
// compute less together than each alone). A task alone takes T = launch + core seconds, core being its
// compute and memory parts (overlapped: the longer; sequential: both). Over its core it draws evenly on
// both: bytes / core of the bus, at most what one device streams alone, and compute / core of a device's
// compute. The tasks on a node share each max-min on those draws, as the network shares a link; a task
// given less than it draws stretches its core to what it needs over what it is given:
// launch + max(core, bytes / r, compute / c). A gang advances at the pace of its slowest node. Work is
// counted in solo seconds, as on time-sliced GPUs (shared_compute.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "fleetsim/ids.hpp"
#include "paced_work.hpp"

namespace fleetsim {

class NodeShares {
 public:
  // Per node, what its devices share; 0 where each device has its own.
  struct Capacity {
    double bus_Bps = 0;          // memory bandwidth, bytes/s
    double compute_devices = 0;  // compute, in devices' worth: what they deliver together over what one does alone
  };
  explicit NodeShares(std::vector<Capacity> nodes);

  // A task's solo figures on each of its devices: fixed and core seconds, the bytes it moves and the
  // seconds of its core it computes.
  struct Work {
    double launch_s = 0;
    double core_s = 0;
    double bytes = 0;
    double compute_s = 0;
  };

  bool any() const { return any_; }
  bool on(NodeId node) const { return capacity_[index(node)][kBus] > 0 || capacity_[index(node)][kCompute] > 0; }
  // The task starts computing on these nodes, one entry per device it uses (a node may repeat).
  // `changed` gets every task whose pace changed, this one included, in task order.
  void start(std::uint32_t task, std::span<const NodeId> devices, Work work, double now_s, std::vector<std::uint32_t>& changed);
  void stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed);
  bool computing(std::uint32_t task) const { return jobs_.contains(task); }
  double work_s(std::uint32_t task) const { return jobs_.at(task).paced.work_s; }
  double done_s(std::uint32_t task, double now_s) const;
  double reaches_s(std::uint32_t task, double left_s) const;
  // What each of the task's devices gets now (for tests and reports): bandwidth, and compute in devices' worth.
  double rate_Bps(std::uint32_t task) const { return jobs_.at(task).given[kBus]; }
  double compute_share(std::uint32_t task) const { return jobs_.at(task).given[kCompute]; }

 private:
  enum Resource : std::uint8_t { kBus, kCompute };
  static constexpr std::size_t kResources = 2;
  using PerResource = std::array<double, kResources>;
  struct Share {
    NodeId node;
    std::uint32_t devices;  // the task's devices there
    PerResource given;      // what each of them gets there now (infinite where not shared)
  };
  struct Job {
    std::vector<Share> nodes;
    Work work;
    PerResource draw{};   // per device, alone
    PerResource given{};  // per device, now: the least over its nodes
    PacedWork paced;
  };
  void advance(std::span<const NodeId> nodes, double now_s, std::vector<std::uint32_t>& changed);
  void share(NodeId node, Resource resource);
  void share(NodeId node);
  void repace(const std::vector<std::uint32_t>& changed);

  std::vector<PerResource> capacity_;  // per node
  bool any_ = false;
  std::vector<std::vector<std::uint32_t>> on_node_;  // per node: its tasks
  std::unordered_map<std::uint32_t, Job> jobs_;
  std::vector<std::uint32_t> order_;  // scratch
};

}  // namespace fleetsim
