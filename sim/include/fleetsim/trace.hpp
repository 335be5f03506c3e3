// The one record both the simulator and the real backends produce: for every task of every workflow
// instance, where it ran, when it became ready, started, began computing and ended, and how it ended.
// Simulated and measured traces of the same scenario can be diffed task by task.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/ids.hpp"

namespace fleetsim {

enum class TaskStatus : std::uint8_t { queued, running, completed, failed };
std::string_view task_status_name(TaskStatus status);

inline constexpr double kNever = -1.0;  // a time the task did not reach

// A task's record, one for every task of every instance, kept for the whole run: the small fields first,
// so that padding costs one slot (136 bytes a record; in the order of their meaning, 144).
struct TaskRecord {
  InstanceId instance{};
  std::uint32_t workflow = 0;  // index into Scenario::workflows
  std::uint32_t task = 0;      // index into that workflow's tasks
  TenantId tenant{};
  std::uint32_t gpu_begin = 0, gpu_count = 0;  // into Trace::gpus
  std::uint32_t batched_with = 0;  // 1 + the task index of its batch's leader (itself, if it led one); 0: ran alone
  std::uint32_t reason = 0;        // into Trace::reasons; 0 is "no reason"
  TaskStatus status = TaskStatus::queued;
  std::uint16_t restarts = 0;       // runs that began by paying the task's elastic restart (saturating)
  double ready_s = kNever;
  double start_s = kNever;          // placed on its GPUs; input transfers begin
  double compute_start_s = kNever;  // inputs arrived
  double comm_start_s = kNever;     // compute done, the gang's collective began (collective tasks)
  double end_s = kNever;
  double input_bytes = 0;           // moved to it from other GPUs
  double offload_bytes = 0;         // of its working set kept in host memory (all its GPUs), for want of VRAM
  double work_scale = 1;            // this instance's FLOP and bytes over the task's written amounts (drawn sizes, trace jobs)
  double resized_s = kNever;        // an elastic task's last resize: its gang (gpu_begin, gpu_count) holds its GPUs from then
  // Why its compute takes what it takes, on its slowest GPU, for all its work (a model step's kernels
  // by bound; fixed: launches and the host's dispatch). Zero where nothing was predicted (a measured run).
  double compute_bound_s = 0, memory_bound_s = 0, fixed_s = 0;
};

// When the task's current gang took its GPUs: its start, or its last resize.
inline double gang_start_s(const TaskRecord& t) { return t.resized_s != kNever ? t.resized_s : t.start_s; }

// A gang a task left before its last run: an elastic task's when it was resized, or any task's when a
// failure or a preemption stopped its run (`stopped`). The GPUs it held from start_s to end_s count as busy.
struct LeftGang {
  TaskId task{};
  double start_s = 0, end_s = 0;
  std::uint32_t gpu_begin = 0, gpu_count = 0;  // into Trace::gpus
  bool stopped = false;
  // Stopped, a training iteration whose job keeps its own checkpoint goes back to the last save: the
  // iterations done since, lost with the run and computed again by its next.
  bool rolled_back = false;
  std::uint32_t iterations_lost = 0;
};

// A model's weights copied onto one GPU of a task because they were not resident there: from host
// memory, or from a peer GPU of the node that had them.
struct WeightLoad {
  TaskId task{};
  GpuId gpu{};
  std::optional<GpuId> peer;  // the source GPU; none: host memory
  bool from_storage = false;  // read from the node's storage, not yet in host memory
  double bytes = 0;
  double start_s = kNever;
  double end_s = kNever;
};

// One scheduling decision, for the audit log (recorded with the timelines): a task placed on GPUs,
// preempted by the policy, failed by the policy, stopped by a failure, or (elastic tasks) resized onto
// a new gang.
// Node decisions are the autoscaler's: a node starts provisioning, a draining node is kept, a node
// drains, a node goes off.
enum class DecisionKind : std::uint8_t { placed, preempted, failed, stopped, resized, node_started, node_kept, node_draining, node_off };
std::string_view decision_kind_name(DecisionKind kind);

struct Decision {
  double time_s = 0;
  DecisionKind kind = DecisionKind::placed;
  TaskId task{};
  std::uint32_t gpu_begin = 0, gpu_count = 0;  // into Trace::gpus: where it was placed or ran
  std::uint32_t reason = 0;                    // into Trace::reasons
  std::optional<NodeId> node = std::nullopt;   // a node decision's node (then `task` means nothing)
};

struct InstanceRecord {
  std::uint32_t workflow = 0;
  TenantId tenant{};
  double arrival_s = 0;
  double end_s = kNever;  // when its last task completed
  bool failed = false;
};

struct Trace {
  std::vector<InstanceRecord> instances;
  std::vector<TaskRecord> tasks;
  std::vector<GpuId> gpus;
  std::vector<WeightLoad> weight_loads;  // in the order they began
  std::vector<Decision> decisions;       // in time order; empty unless recorded
  std::vector<LeftGang> left_gangs;      // in time order: elastic tasks' gangs before each resize
  std::vector<std::string> reasons{""};
  // Records a run dropped from the front of `instances` and `tasks` once they were folded into its summary
  // (RunOptions::keep_records false): ids stay as they were, so task k's record is tasks[k - tasks_dropped].
  std::uint32_t instances_dropped = 0, tasks_dropped = 0;

  std::uint32_t add_reason(std::string reason);
  TaskRecord& task(TaskId id) { return tasks[index(id) - tasks_dropped]; }
  const TaskRecord& task(TaskId id) const { return tasks[index(id) - tasks_dropped]; }
  InstanceRecord& instance(std::uint32_t id) { return instances[id - instances_dropped]; }
  const InstanceRecord& instance(std::uint32_t id) const { return instances[id - instances_dropped]; }
  TaskId id_of(const TaskRecord& r) const { return make_id<TaskId>(static_cast<std::uint32_t>(&r - tasks.data()) + tasks_dropped); }
};

}  // namespace fleetsim
