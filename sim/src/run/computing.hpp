// When each running task's compute ends. A gang splits its instance's work evenly and ends with its
// slowest member; a run resuming from a checkpoint pays its restore (after a resize, its restart) and
// computes what is left. On time-sliced GPUs a task shares each GPU with the tasks computing there, so
// its end, and theirs, move whenever those tasks change: a task's events carry its stamp
// (run/events.hpp), which moves on when they go stale. A gang with collectives ends when its compute
// and every collective are done; each collective starts when the compute ends, or earlier by the share
// of the compute it overlaps. On a node whose devices share a memory bus, the tasks computing there
// share its bandwidth, so their ends move the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "../node_shares.hpp"
#include "../shared_compute.hpp"
#include "events.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "occupancy.hpp"
#include "recovery.hpp"

namespace fleetsim::run {

class Computing {
 public:
  // `restartable`: runs may be stopped, so task events carry stamps even where no GPU is time-sliced.
  Computing(const Scenario& scenario, const Cluster& cluster, const ComputeModel& compute, Trace& trace, Occupancy& occupancy,
            Recovery& recovery, EventQueue& queue, bool restartable);

  const SharedCompute& shared() const { return shared_; }
  // A task event of this kind for the task's current run; whether an event's stamp is current.
  std::uint32_t event(EventKind kind, TaskId task) const { return stamped_ ? stamped(kind, stamp_[index(task)]) : kind; }
  bool current(std::uint32_t stamp, std::uint32_t task) const { return !stamped_ || stamp == (stamp_[task] & kStampMask); }
  void size_tasks(const RecordCounts& n);

  // The task's compute begins now on its gang. `known_scale`: the part of its work declared in advance,
  // by which policies predict when its GPUs are free.
  void start(TaskId task, double known_scale);
  // A batch computes as one: its members' estimate, ended with the leader's.
  void start_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate);
  // kComputeDone. Returns the collectives that follow the compute, which start now (a bit each, by
  // their place in the task's list).
  std::uint8_t compute_done(TaskId task);
  // kCommStart: the overlapped collective due now (the one overlapping most of those not yet begun),
  // marked begun; nothing when none is left (the event is stale).
  std::optional<std::uint32_t> collective_due(TaskId task);
  // One part of the task (its compute, one collective) is done; true when it was the last.
  bool part_done(TaskId task) { return --parts_left_[index(task)] == 0; }

  // Whether the task computes now on time-sliced GPUs or on a node whose devices share memory or
  // compute; the compute seconds it has done since its compute began (solo seconds where it shares).
  bool sharing(TaskId task) const { return shared_.computing(index(task)) || node_shares_.computing(index(task)); }
  double computed_s(TaskId task, double now_s) const;
  // The task leaves its GPUs: the tasks sharing them go on at their new pace.
  void leave(TaskId task);
  // The task's run ended (stopped, resized): its pending compute and collective events are stale.
  void end_run(TaskId task);

 private:
  void run(TaskId task, double compute_s, const ComputeEstimate& per_device);
  // The collectives the task's gang runs (none on one GPU), and whether the k-th has begun.
  std::span<const CollectiveSpec> collectives_of(TaskId task) const;
  bool begun(TaskId task, std::size_t k) const { return (begun_[index(task)] >> k & 1u) != 0; }
  // Calls `due(overlap)` for each collective of the task not yet begun that overlaps its compute.
  template <typename Due>
  void for_each_overlapped(TaskId task, Due due) const;
  void repace(const std::vector<std::uint32_t>& tasks);
  // Where a sharing task's pace is kept: time-sliced GPUs or the node's shares.
  double work_s(std::uint32_t task) const { return shared_.computing(task) ? shared_.work_s(task) : node_shares_.work_s(task); }
  double reaches_s(std::uint32_t task, double left_s) const {
    return shared_.computing(task) ? shared_.reaches_s(task, left_s) : node_shares_.reaches_s(task, left_s);
  }

  const Scenario& sc_;
  const Cluster& cluster_;
  const ComputeModel& compute_;
  Trace& trace_;
  Occupancy& occupancy_;
  Recovery& recovery_;
  EventQueue& queue_;
  SharedCompute shared_;                   // the pace of tasks on time-sliced GPUs
  NodeShares node_shares_;                 // the pace of tasks on nodes whose devices share memory bandwidth or compute
  std::vector<std::uint8_t> parts_left_;   // per running task: its compute and collectives not yet done
  std::vector<std::uint8_t> begun_;        // per running task: its collectives begun, a bit each
  bool stamped_;                           // task events carry stamps (some may go stale)
  std::vector<std::uint32_t> stamp_;       // per task: its events' stamp (none kept where nothing goes stale)
  std::vector<std::uint32_t> changed_;     // scratch: tasks whose pace changed
  std::vector<NodeId> nodes_;              // scratch: a task's devices' nodes
};

}  // namespace fleetsim::run
