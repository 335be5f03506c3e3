// A scheduling round. The policy sees the ready queue and the cluster (ClusterView) and decides; the
// round checks every decision before the run carries it out (a task decided once per round, placed on
// a gang of its size, on GPUs that exist, are free, hold its VRAM and its tenant may use; preemptions
// only by a policy that declares them, of GPUs that run something) and records it in the decision
// log, where the run's own decisions (stops, resizes, batch members) go too. Listeners see the ready
// queue before the policy and after the decisions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "listener.hpp"
#include "occupancy.hpp"
#include "predictions.hpp"
#include "ready_queue.hpp"

namespace fleetsim::run {

// What a round asks of the run, which carries its checked decisions out.
class RoundHost {
 public:
  virtual ~RoundHost() = default;
  virtual ClusterView view() const = 0;
  virtual void start(TaskId task, std::span<const GpuId> gpus) = 0;
  virtual void fail(TaskId task, const std::string& reason) = 0;
  virtual void preempt(TaskId task, const Decisions::Preemption& how) = 0;
  // A batching task the policy placed: ready tasks of its key may join it (see decided()).
  virtual void fill_batch(TaskId leader) = 0;
};

class PolicyRound {
 public:
  // `policy` decides; the scenario names it in messages.
  PolicyRound(const Scenario& scenario, std::unique_ptr<Policy> policy, const Cluster& cluster, const Occupancy& occupancy,
              const GpuMemory& memory, const Predictions& predicted, Trace& trace, const EventQueue& queue, bool record_decisions);
  // The scenario's policy, from the registry.
  static std::unique_ptr<Policy> make_policy(const Scenario& scenario);

  ReadyQueue& ready() { return ready_; }
  bool may_preempt() const { return policy_->may_preempt(); }

  // One round over the ready queue; returns whether the policy placed tasks while others still wait
  // (where GPUs are time-sliced, another round at once may place more). Throws PolicyError naming the
  // task and the rule a decision broke.
  bool play(RoundHost& host, const std::vector<RunListener*>& listeners);
  // Within a round: whether the ready task at `i` has been decided on; a batch member is taken so.
  bool decided(std::size_t i) const { return i < decided_.size() && decided_[i] != 0; }
  void decide(std::size_t i);

  // The decision log (kept when the run records timelines).
  bool recording() const { return record_decisions_; }
  void record(DecisionKind kind, TaskId task, const std::string& reason);
  void record_node(DecisionKind kind, NodeId node, const std::string& reason);

  // An elastic resize onto `gang`, keeping the GPUs in `kept`: checked as a placement, its new GPUs idle.
  // A failed check is a bug in the elastic component, an internal error.
  void check_resize(TaskId task, std::span<const GpuId> gang, std::span<const GpuId> kept, const ClusterView& view) const;

  // The time the last round's policy asked to be woken at (infinity: none).
  double wake_at_s() const { return decisions_.wake_at_s(); }

  // "task "t" of workflow "w" (instance 3)".
  std::string label(TaskId task) const;

 private:
  const TaskSpec& spec(TaskId task) const;
  TaskId claim(std::uint32_t ready_index);
  void check_placement(TaskId task, std::span<const GpuId> gpus, const ClusterView& view) const;
  // Why placing the task on `gpus` breaks a rule ("" when it does not); GPUs in `kept` are already its own.
  std::string placement_problem(TaskId task, std::span<const GpuId> gpus, std::span<const GpuId> kept, const ClusterView& view) const;
  void carry_out_preemptions(RoundHost& host);
  [[noreturn]] void reject(TaskId task, const std::string& why) const;

  const Scenario& sc_;
  const Cluster& cluster_;
  const Occupancy& occupancy_;
  const GpuMemory& memory_;
  const Predictions& predicted_;
  Trace& trace_;
  const EventQueue& queue_;
  bool record_decisions_;
  std::unique_ptr<Policy> policy_;
  ReadyQueue ready_;
  // Per ready task, whether this round decided on it, and those decided: the flags are cleared one by
  // one after the round, so a round costs what it decides, not the queue's length.
  std::vector<std::uint8_t> decided_;
  std::vector<std::uint32_t> decided_list_;
  Decisions decisions_;
  std::vector<GpuId> freed_;           // GPUs freed by this round's preemptions
};

}  // namespace fleetsim::run
