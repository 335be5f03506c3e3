// Tasks' collectives: planned over the links up when the collective starts, then played step by step
// (a step's flows start together; the next starts once all of them have been delivered). A task's
// collectives (TaskSpec::collectives, by their place there) may run at once, each on a plan of its own;
// a plan lives only while its collective runs, and its slot is reused.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/workflow.hpp"
#include "slots.hpp"

namespace fleetsim::run {

class Collectives {
 public:
  Collectives(const Cluster& cluster, const Topology& topology) : cluster_(cluster), topology_(topology) {}
  void size_tasks(const RecordCounts& n) { grow(plan_of_, n.tasks, n.most_tasks, kNone); }

  // Why a collective cannot start on its gang: its algorithm does not apply there (the task fails), or
  // failed links have cut a GPU of the gang off from the first (the task is stopped, as a failure stops it).
  struct Blocked {
    bool cut;
    std::string reason;
  };
  // Whether the collective has anything to play on `gang`: false only for one that runs split groups only
  // (CollectiveSpec::split_groups_only: consecutive ranks, no offset) where no group is split across nodes that
  // could each hold one whole.
  bool plays(const CollectiveSpec& collective, std::span<const GpuId> gang) const;
  // Plans the task's collective `which` on `gang` (rank order), which it plays; nothing when it cannot run.
  std::optional<Blocked> begin(TaskId task, std::uint32_t which, const CollectiveSpec& collective, std::span<const GpuId> gang);
  // The flows of the collective's next step, all of which are then awaited; nothing after its last step
  // (its plan is then given back).
  const std::vector<CollectiveFlow>* next_step(TaskId task, std::uint32_t which);
  // One flow of the collective's current step was delivered: true when it was the step's last.
  bool delivered(TaskId task, std::uint32_t which);
  bool running(TaskId task) const { return plan_of_[index(task)] != kNone; }
  // The task was stopped mid-collective: every plan it runs is given back.
  void drop(TaskId task);

 private:
  // Drops from groups_ the groups split_groups_only does not run.
  void keep_split_groups(const CollectiveSpec& c);
  bool split_group(std::span<const GpuId> group) const;
  // A GPU of the gang that failed links have cut off from its first one, if any.
  std::optional<GpuId> split(std::span<const GpuId> gang) const;

  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  struct Playing {
    CollectivePlan plan;
    std::size_t step = 0;        // the next step to start
    std::uint32_t pending = 0;   // flows of the current step not yet delivered
    std::uint32_t which = 0;     // the collective's place in its task's list
    std::uint32_t next = kNone;  // the slot of the task's next running plan
  };
  Playing* find(TaskId task, std::uint32_t which);
  void give_back(TaskId task, std::uint32_t which);

  const Cluster& cluster_;
  const Topology& topology_;
  std::vector<Playing> plans_;
  std::vector<std::uint32_t> free_;     // slots of plans_ given back
  std::vector<std::uint32_t> plan_of_;  // per task: the slot of its first running plan (the others chained from it)
  std::vector<GpuId> groups_;           // scratch: a grouped collective's ranks, group after group
};

}  // namespace fleetsim::run
