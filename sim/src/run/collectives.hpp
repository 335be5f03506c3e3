// Tasks' collectives: planned over the links up when the collective starts, then played step by step
// (a step's flows start together; the next starts once all of them have been delivered). A plan lives
// only while its task's collective runs; its slot is reused.
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

namespace fleetsim::run {

class Collectives {
 public:
  Collectives(const Cluster& cluster, const Topology& topology) : cluster_(cluster), topology_(topology) {}
  void size_tasks(std::size_t tasks) { plan_of_.assign(tasks, kNone); }

  // Why a collective cannot start on its gang: its algorithm does not apply there (the task fails), or
  // failed links have cut a GPU of the gang off from the first (the task is stopped, as a failure stops it).
  struct Blocked {
    bool cut;
    std::string reason;
  };
  // Plans the task's collective on `gang` (rank order); nothing when it cannot run.
  std::optional<Blocked> begin(TaskId task, const CollectiveSpec& collective, std::span<const GpuId> gang);
  // The flows of the task's next step; nothing after its last step (its plan is then given back).
  const std::vector<CollectiveFlow>* next_step(TaskId task);
  bool running(TaskId task) const { return plan_of_[index(task)] != kNone; }
  // The task was stopped mid-collective.
  void drop(TaskId task);

 private:
  // A GPU of the gang that failed links have cut off from its first one, if any.
  std::optional<GpuId> split(std::span<const GpuId> gang) const;

  struct Playing {
    CollectivePlan plan;
    std::size_t step = 0;  // the next step to start
  };
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  const Cluster& cluster_;
  const Topology& topology_;
  std::vector<Playing> plans_;
  std::vector<std::uint32_t> free_;     // slots of plans_ given back
  std::vector<std::uint32_t> plan_of_;  // per task: its plan's slot while its collective runs
  std::vector<GpuId> groups_;           // scratch: a grouped collective's ranks, group after group
};

}  // namespace fleetsim::run
