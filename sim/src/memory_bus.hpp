// A node's memory bus shared by its devices (the CPU backend's workers share the machine's memory
// bandwidth). A task alone takes T = launch + core seconds, core being its compute and memory parts
// (overlapped: the longer; sequential: both), and moves its bytes at bytes / core, at most what one
// device streams alone. The tasks on a node share the bus max-min on those draws: a task given r
// takes launch + max(core, bytes / r). A gang advances at the pace of its slowest node. Work is
// counted in solo seconds, as on time-sliced GPUs (shared_compute.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "fleetsim/ids.hpp"
#include "paced_work.hpp"

namespace fleetsim {

class MemoryBus {
 public:
  // Per node: the bandwidth its devices share, in bytes/s; 0 where each device has its own.
  explicit MemoryBus(std::vector<double> bus_Bps);

  // A task's solo figures on each of its devices: fixed and core seconds, and the bytes it moves.
  struct Work {
    double launch_s = 0;
    double core_s = 0;
    double bytes = 0;
  };

  bool any() const { return any_; }
  bool on(NodeId node) const { return bus_Bps_[index(node)] > 0; }
  // The task starts computing on these nodes, one entry per device it uses (a node may repeat).
  // `changed` gets every task whose pace changed, this one included, in task order.
  void start(std::uint32_t task, std::span<const NodeId> devices, Work work, double now_s, std::vector<std::uint32_t>& changed);
  void stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed);
  bool computing(std::uint32_t task) const { return jobs_.contains(task); }
  double work_s(std::uint32_t task) const { return jobs_.at(task).paced.work_s; }
  double done_s(std::uint32_t task, double now_s) const;
  double reaches_s(std::uint32_t task, double left_s) const;
  // The bandwidth each of the task's devices draws now (for tests and reports).
  double rate_Bps(std::uint32_t task) const { return jobs_.at(task).rate_Bps; }

 private:
  struct Share {
    NodeId node;
    std::uint32_t devices;  // the task's devices there
    double rate_Bps;        // what each of them gets there now (infinite off a shared bus)
  };
  struct Job {
    std::vector<Share> nodes;
    Work work;
    double demand_Bps = 0;  // per device, alone
    double rate_Bps = 0;    // per device, now: the least over its nodes
    PacedWork paced;
  };
  void advance(std::span<const NodeId> nodes, double now_s, std::vector<std::uint32_t>& changed);
  void share(NodeId node);
  void repace(const std::vector<std::uint32_t>& changed);

  std::vector<double> bus_Bps_;
  bool any_ = false;
  std::vector<std::vector<std::uint32_t>> on_node_;  // per node: its tasks
  std::unordered_map<std::uint32_t, Job> jobs_;
  std::vector<std::uint32_t> order_;  // scratch
};

}  // namespace fleetsim
