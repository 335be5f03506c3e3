// The autoscaler: every interval it decides how many nodes should be on (by utilization, queue wait
// or a schedule), provisions nodes that are off, and drains nodes it no longer wants. A draining
// node's GPU goes off once it runs nothing and holds no tensor a consumer waits for; the node is off
// (and no longer billed) when all of its GPUs are, with its VRAM emptied. A node holding a serving replica
// stays on, counted apart: the autoscaler sizes the rest for the tasks. Each of these decisions goes in the
// run's decision log.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "billing.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/policy.hpp"
#include "listener.hpp"
#include "occupancy.hpp"
#include "policy_round.hpp"
#include "serving.hpp"
#include "workload.hpp"

namespace fleetsim::run {

class Autoscaler : public RunListener {
 public:
  // It sees the round's ready queue and records its decisions in the round's log. `node_off` is told
  // when a node goes off: its host memory is gone. It decides while `work_left` says there is work;
  // `serving_wants` is the nodes serving replicas' autoscaling wanted and found no free GPUs for, by node group.
  Autoscaler(const Scenario& scenario, const Cluster& cluster, EventQueue& queue, Occupancy& occupancy, GpuMemory& memory,
             Billing& billing, std::function<bool()> work_left, std::function<std::vector<Serving::NodesWanted>()> serving_wants, PolicyRound& round,
             std::function<void(std::uint32_t node)> node_off);

  // Nodes past `initial_nodes` start off, but those holding serving replicas; the first decision comes one
  // interval in.
  void start();
  bool starts_on(std::uint32_t node) const { return node < static_cast<std::uint32_t>(sc_.autoscale.initial_nodes) || pinned(node); }
  void on_decide();                      // kAutoscale
  void on_node_up(std::uint32_t node);   // kNodeUp
  void gpu_released(std::uint32_t gpu) override;
  // Seconds each node was billed by `end_s`, nodes started and stopped, and the idle power of nodes off.
  void summarize(double end_s, Summary& summary);
  double billed_s(std::uint32_t node) const { return billed_s_[node]; }

 private:
  enum class NodeState : std::uint8_t { on, off, provisioning, draining };

  int nodes_on() const;
  int desired_nodes() const;
  // The nodes serving replicas want (serving_wants), each all of what it needs or none, from what its group has
  // not on: off, draining or provisioning nodes, shared in order among the deployments of one group; `unserved`:
  // less the provisioning ones, already on their way.
  std::vector<Serving::NodesWanted> serving_nodes(bool unserved) const;
  // A GPU of the node is held by a serving replica: the node stays on.
  bool pinned(std::uint32_t node) const;
  int pinned_nodes() const;
  // No task runs on any GPU of the node.
  bool runs_no_task(std::uint32_t node) const {
    bool none = true;
    for_gpus_of(node, [&](std::uint32_t g) { none = none && occupancy_.tasks_on(g).empty(); });
    return none;
  }
  void set_gpus_off(std::uint32_t node, bool off);
  void turn_off(std::uint32_t node, const std::string& why);
  void record(DecisionKind kind, std::uint32_t node, const std::string& why) { round_.record_node(kind, make_id<NodeId>(node), why); }
  template <typename F>
  void for_gpus_of(std::uint32_t node, F f) const {
    const std::uint32_t first = index(cluster_.first_gpu(make_id<NodeId>(node)));
    for (std::uint32_t g = first; g < first + cluster_.gpus_in(make_id<NodeId>(node)); ++g) f(g);
  }

  const Scenario& sc_;
  const Cluster& cluster_;
  EventQueue& queue_;
  Occupancy& occupancy_;
  GpuMemory& memory_;
  Billing& billing_;
  std::function<bool()> work_left_;
  std::function<std::vector<Serving::NodesWanted>()> serving_wants_;
  PolicyRound& round_;
  const ReadyQueue& ready_;
  std::function<void(std::uint32_t)> node_off_;
  std::vector<NodeState> node_state_;
  std::vector<double> billed_since_;           // per node: when it was last turned on
  std::vector<double> billed_s_;               // per node: seconds on, before billed_since_
  std::uint64_t nodes_started_ = 0, nodes_stopped_ = 0;
  std::deque<std::pair<double, int>> wanted_;  // recent decisions, for the scale-in window
};

}  // namespace fleetsim::run
