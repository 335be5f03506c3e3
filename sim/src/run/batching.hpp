// Batching: which tasks may share a batch (one key per model and operator profile or model step with
// the same batching settings, whichever workflow they belong to: a serving engine batches requests,
// not graphs), tasks held out of the policy's sight until their batch fills or its first member has
// waited max_wait, and the batches formed: when the policy places a batching task, the ready tasks
// of its key that the round left join it on its GPU (a slot per batch, reused, the leader first), and
// once every member has its inputs the batch computes as one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "occupancy.hpp"
#include "policy_round.hpp"
#include "predictions.hpp"
#include "slots.hpp"

namespace fleetsim::run {

// What forming a batch asks of the run, whose tasks join it and compute.
class BatchHost {
 public:
  virtual ~BatchHost() = default;
  virtual ClusterView view() const = 0;
  // `member` is placed on the leader's GPU `gpu` (its working set in VRAM, what does not fit in host memory).
  virtual void place_member(TaskId member, TaskId leader, GpuId gpu) = 0;
  // Its inputs start moving to `gpu`; whether some are still on their way.
  virtual void send_inputs(TaskId member, GpuId gpu) = 0;
  virtual bool inputs_pending(TaskId member) const = 0;
  // The members compute as one, from now, for `estimate`: the leader's end ends them all.
  virtual void compute_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate) = 0;
};

class Batching {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  // `round_wanted` is set when held tasks join the ready queue.
  Batching(const Scenario& scenario, const Cluster& cluster, const Trace& trace, const Predictions& predicted,
           const ComputeModel& compute, const Occupancy& occupancy, const GpuMemory& memory, EventQueue& queue, bool& round_wanted);
  void size_tasks(const RecordCounts& n) { grow(batch_of_, n.tasks, n.most_tasks, kNone); }

  std::uint32_t key(const TaskRecord& r) const { return key_of_[r.workflow][r.task]; }

  // A ready task that batches with a wait: held until its batch is full (then all join `ready`) or
  // until the first one held has waited max_wait. False: not held, it is ready now.
  bool hold(std::uint32_t key, const ReadyTask& task, ReadyQueue& ready);
  // kBatchRelease: the key's held tasks join `ready` if they are still held and their wait is over.
  bool release_due(std::uint32_t key, ReadyQueue& ready);
  // The task is no longer waiting (it failed): it leaves any hold.
  void forget(TaskId task);

  // The policy placed `leader` (a batching task) in this round: the ready tasks of its key the round left
  // join it, in ready order, as many as max_size allows, its GPU's VRAM holds and their tenants may share.
  void fill(TaskId leader, PolicyRound& round, BatchHost& host);
  // A member's inputs have all arrived; the last one's start the batch.
  void member_ready(TaskId member, BatchHost& host);

  // Batches: a new one led by `leader`, a member joining, and the batch a task is in (kNone if none).
  std::uint32_t open(TaskId leader);
  void join(std::uint32_t batch, TaskId member);
  std::uint32_t batch_of(TaskId task) const { return batch_of_[index(task)]; }
  const std::vector<TaskId>& members(std::uint32_t batch) const { return batches_[batch].members; }
  // The batch ends, or one of its members is stopped (then all are): its members go their own way.
  // The slot is not reused before the next scheduling round, so its members stay readable.
  void dissolve(TaskId member);

  // What makes tasks' work the same but for its amount: one operator profile, or one model step at
  // one shape but its batch ("" for work given as FLOP and bytes).
  static std::string work_identity(const TaskSpec& spec);

 private:
  struct Batch {
    std::vector<TaskId> members;  // the leader first
    std::uint32_t waiting = 0;    // members whose inputs have not all arrived
  };

  void release(std::uint32_t key, ReadyQueue& ready);
  void start(std::uint32_t batch, BatchHost& host);
  const TaskSpec& spec(TaskId task) const;

  const Scenario& sc_;
  const Cluster& cluster_;
  const Trace& trace_;
  const Predictions& predicted_;
  const ComputeModel& compute_;
  const Occupancy& occupancy_;
  const GpuMemory& memory_;
  EventQueue& queue_;
  bool& round_wanted_;
  std::vector<std::vector<std::uint32_t>> key_of_;  // per workflow, per task
  std::vector<std::vector<ReadyTask>> held_;        // per key
  std::vector<double> hold_deadline_;               // per key
  std::vector<Batch> batches_;
  std::vector<std::uint32_t> free_batches_, batch_of_;
};

}  // namespace fleetsim::run
