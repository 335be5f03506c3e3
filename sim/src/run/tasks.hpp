// The task lifecycle: ready (its inputs produced), placed by a policy round (or joining a batch, or
// resized by the elastic component), reading its inputs and loading its weights, computing (on
// time-sliced GPUs at a pace shared with the tasks there), running its collective, then ended or
// failed, with everything downstream of a failure. Failures, preemptions and flows no route can carry
// stop a running task (run/recovery keeps its runs and checkpoints). Owns the per-task state and the
// parts only the lifecycle uses: collectives, weight loads, edge tensors, recovery, shared compute.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "batching.hpp"
#include "collectives.hpp"
#include "computing.hpp"
#include "elastic.hpp"
#include "events.hpp"
#include "flows.hpp"
#include "instance_gpus.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/trace.hpp"
#include "listener.hpp"
#include "occupancy.hpp"
#include "policy_round.hpp"
#include "predictions.hpp"
#include "recovery.hpp"
#include "tensors.hpp"
#include "weight_loads.hpp"
#include "workload.hpp"

namespace fleetsim::run {

class Tasks : public ElasticHost, public RoundHost, public BatchHost {
 public:
  // `restartable`: runs may be stopped (failures, preemption, resizes). `round_wanted` is set whenever
  // something may let a waiting task start; `listeners` hear of starts and of GPUs released.
  Tasks(const Scenario& scenario, const Cluster& cluster, const Topology& topology, GpuMemory& memory, const ComputeModel& compute,
        Flows& flows, Occupancy& occupancy, const Predictions& predicted, Workload& workload, Batching& batching,
        PolicyRound& round, EventQueue& queue, Trace& trace, const std::vector<RunListener*>& listeners, bool& round_wanted,
        bool restartable);

  // Instances arrived: the per-task tables grow.
  void size_tasks(const RecordCounts& n);
  // The task's inputs are all produced (or it is retried): it joins the ready queue, or its batch's hold.
  void make_ready(TaskId task);

  // One GPU an instance: the tasks waiting for their instance's GPU start where it runs nothing now
  // (before each policy round).
  void start_on_instance_gpus();

  // Task events (run/events.hpp): whether the event's stamp is the task's current one (else it is stale).
  bool current(std::uint32_t stamp, std::uint32_t task) const { return computing_.current(stamp, task); }
  void on_compute_done(TaskId task);
  // kCommStart: an overlapped collective starts before the compute ends; false when none was due (stale).
  bool on_collective_start(TaskId task);
  void on_retry(TaskId task);
  void on_network();  // the flows just delivered

  // Failures. A running task is stopped; a task with a flow no route can carry is stopped after the
  // current event, when nothing of it is half done; a failed GPU's output tensors are lost.
  void stop(TaskId task, const std::string& why) { stop_task(task, why); }
  void strand(TaskId task, std::string why);
  void stop_stranded();
  void lose_tensors(GpuId gpu, const std::string& event);
  void host_memory_lost(NodeId node) { weights_.host_lost(node); }

  const SharedCompute& shared() const { return computing_.shared(); }
  void summarize(Summary& summary) const { recovery_.summarize(summary); }

  // RoundHost, BatchHost and ElasticHost: carrying out the decisions of a policy round, of batching
  // and of the elastic component.
  ClusterView view() const override;
  void start(TaskId task, std::span<const GpuId> gpus) override { start_task(task, gpus); }
  void fail(TaskId task, const std::string& reason) override { fail_task(task, reason); }
  void preempt(TaskId task, const Decisions::Preemption& how) override {
    stop_task(task, "preempted: " + how.reason, how.suspend ? Stop::suspended : Stop::preempted, how.restore_s);
  }
  void fill_batch(TaskId leader) override;
  void place_member(TaskId member, TaskId leader, GpuId gpu) override;
  void send_inputs(TaskId member, GpuId gpu) override;
  bool inputs_pending(TaskId member) const override;
  void compute_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate) override;
  bool computing_alone(TaskId task) const override;
  void resize(TaskId task, const std::vector<GpuId>& gang, const std::string& why) override;
  std::string label(TaskId task) const override { return round_.label(task); }

 private:
  const TaskSpec& spec(const TaskRecord& r) const { return sc_.workflows[r.workflow].tasks[r.task]; }
  double known_scale(TaskId task) const { return workload_.known_scale(trace_.task(task).instance); }
  std::string no_route(std::uint32_t from, std::uint32_t to) const;

  void start_task(TaskId task, std::span<const GpuId> gpus);
  void load_weights(TaskId task, std::uint32_t member, GpuId g, std::uint32_t model, double weights);
  void start_inputs(TaskId task, GpuId to);
  void start_flow(TaskId task, std::uint32_t from, std::uint32_t to, double bytes, FlowTag tag, std::uint64_t key);
  void start_compute(TaskId task);
  void begin_collective(TaskId task, std::uint32_t which);
  void start_collective_step(TaskId task, std::uint32_t which);
  // A failure's stop uses a retry attempt; a preemption's does not, and a suspension saves all the
  // task computed (it pays `restore_s` when it runs again).
  enum class Stop { failed, preempted, suspended };
  void stop_task(TaskId task, const std::string& what, Stop how = Stop::failed, double restore_s = 0);
  // A training job that keeps its own checkpoint goes back to the last one saved: the iterations lost
  // (done since), which its next run computes again, and the compute a GPU newly lost (those iterations the
  // first time, and what a suspension had saved of the stopped one).
  struct RollBack {
    bool happened = false;
    std::uint32_t iterations = 0;
    double lost_s = 0;
  };
  RollBack roll_back(TaskId id, const TaskRecord& r, const TaskSpec& s);
  void give_back_gpu(const TaskRecord& r, GpuId g, double offloaded_bytes);
  void released(std::uint32_t gpu);
  double served_gpu_s(const TaskRecord& r, double now) const;
  void release_gpus(const TaskRecord& r);
  void end_task(TaskId task);
  void abort_running(TaskId task, const std::string& reason);
  void fail_task(TaskId task, const std::string& reason);

  const Scenario& sc_;
  const Cluster& cluster_;
  const Topology& topology_;
  GpuMemory& memory_;
  const ComputeModel& compute_;
  Flows& flows_;
  Occupancy& occupancy_;
  const Predictions& predicted_;
  Workload& workload_;
  Batching& batching_;
  PolicyRound& round_;
  EventQueue& queue_;
  Trace& trace_;
  const std::vector<RunListener*>& listeners_;
  bool& round_wanted_;

  InstanceGpus instance_gpus_;
  Collectives collectives_;
  WeightLoads weights_;
  Tensors tensors_;
  Recovery recovery_;
  Computing computing_;
  std::vector<std::uint32_t> pending_flows_;  // per task: its input and weight flows not yet delivered
  std::vector<double> offloaded_;             // per entry of trace_.gpus: working-set bytes its task keeps in host memory
  struct Stranded {
    TaskId task;
    std::uint32_t run;  // the run it was stranded in
    std::string reason;
  };
  std::vector<Stranded> stranded_;       // tasks with a flow no route can carry, stopped after the event
  std::vector<std::uint64_t> dropped_;   // scratch: tags of cancelled flows
};

}  // namespace fleetsim::run
