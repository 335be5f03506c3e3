// Elastic tasks run on any degree from their min_gpus to their gpus. Before each scheduling round a
// waiting elastic task asks for as many GPUs as are free for it; at the end of the round, while tasks
// the policy left wait, running elastic tasks above their minimum give GPUs back for the oldest
// waiting one, and when none waits they grow onto free GPUs. A task is resized at most once per its
// min_interval (from its start or last resize) and only while it computes. This component decides;
// the run carries a resize out (ElasticHost::resize), as a decision of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../shared_compute.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "listener.hpp"
#include "slots.hpp"
#include "occupancy.hpp"
#include "predictions.hpp"

namespace fleetsim::run {

// What the elastic component asks of the run, whose tasks it resizes.
class ElasticHost {
 public:
  virtual ~ElasticHost() = default;
  virtual ClusterView view() const = 0;
  // Its inputs and weights in, its collective not begun, not sharing a time-sliced GPU.
  virtual bool computing_alone(TaskId task) const = 0;
  // Moves a computing task onto `gang` (the GPUs it keeps, in their order, then new ones).
  virtual void resize(TaskId task, const std::vector<GpuId>& gang, const std::string& why) = 0;
  virtual std::string label(TaskId task) const = 0;
};

class Elastic : public RunListener {
 public:
  Elastic(const Scenario& scenario, const Cluster& cluster, const Trace& trace, const Occupancy& occupancy, const GpuMemory& memory,
          const SharedCompute& shared, const Predictions& predicted, EventQueue& queue, ElasticHost& host);
  static bool any(const Scenario& scenario);  // whether the scenario has elastic tasks
  void size_tasks(const RecordCounts& n) {
    run::grow(wake_s_, n.tasks, n.most_tasks, kNever);
    run::grow(listed_, n.tasks, n.most_tasks, std::uint8_t{0});
  }

  void task_started(TaskId task) override;
  void round_begins(std::span<ReadyTask> ready) override;
  void round_ends(std::span<const ReadyTask> ready) override;

 private:
  const TaskSpec& spec(const TaskRecord& r) const { return sc_.workflows[r.workflow].tasks[r.task]; }
  std::uint32_t free_gpus_for(const ReadyTask& task) const;
  bool asked_too_many(const ReadyTask& task) const;
  bool resizable(TaskId task) const;
  void wake_when_resizable(TaskId task, bool waiting);
  void grow(TaskId task);
  double predicted_wait_s(const ReadyTask& waiting, std::uint32_t lacking);
  void shrink_for(const ReadyTask& waiting);

  const Scenario& sc_;
  const Cluster& cluster_;
  const Trace& trace_;
  const Occupancy& occupancy_;
  const GpuMemory& memory_;
  const SharedCompute& shared_;
  const Predictions& predicted_;
  EventQueue& queue_;
  ElasticHost& host_;
  std::vector<TaskId> running_;        // placed elastic tasks (some may have ended since)
  std::vector<std::uint8_t> listed_;   // per task: in running_
  std::vector<double> wake_s_;         // per task: the round asked for when its min_interval passes
  std::vector<GpuId> gang_;            // scratch: a resized task's new gang
  std::vector<TaskId> order_;          // scratch: tasks that may give GPUs back, in order
  std::vector<double> free_at_;        // scratch: when busy GPUs are predicted free
};

}  // namespace fleetsim::run
