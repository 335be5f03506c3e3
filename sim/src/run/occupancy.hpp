// Who holds each GPU and how much each tenant and instance has had: the state a policy sees through
// ClusterView. A GPU is busy for the policy while it runs all the tasks it can (one, unless
// time-sliced), it is down, or its node is off.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"
#include "slots.hpp"

namespace fleetsim::run {

class Occupancy {
 public:
  // `round_wanted` is set whenever a GPU turns free: a waiting task may start there.
  Occupancy(const Scenario& scenario, const Cluster& cluster, const Trace& trace, bool& round_wanted);
  // Per-instance attained service, once the workload has drawn its instances.
  void size_instances(const RecordCounts& n) { grow(attained_s_, n.instances, n.most_instances, 0.0); }

  ClusterView view(const GpuMemory& memory, const ComputeModel& compute, std::span<const double> job_sizes, double now_s) const;

  // The tasks running on a GPU (several where it is time-sliced), first placed first.
  const std::vector<std::uint32_t>& tasks_on(std::uint32_t gpu) const { return gpu_tasks_[gpu]; }
  void add_task(std::uint32_t gpu, std::uint32_t task);
  void remove_task(std::uint32_t gpu, std::uint32_t task);
  bool busy(std::uint32_t gpu) const { return gpu_busy_[gpu] != 0; }
  bool down(std::uint32_t gpu) const { return gpu_down_[gpu] != 0; }  // failed, not yet repaired
  void set_down(std::uint32_t gpu, bool down);
  // Held by a serving replica for the whole run: never free for a task.
  void set_held(std::uint32_t gpu, bool held);
  bool held(std::uint32_t gpu) const { return gpu_held_[gpu] != 0; }
  bool off(std::uint32_t gpu) const { return gpu_off_[gpu] != 0; }  // its node is off, or draining and this GPU idle
  void set_off(std::uint32_t gpu, bool off);
  // When the GPU is predicted to be free again.
  double free_at_s(std::uint32_t gpu) const { return gpu_free_at_[gpu]; }
  void set_free_at(std::uint32_t gpu, double at_s) { gpu_free_at_[gpu] = at_s; }
  // GPUs a tenant holds now; GPU-seconds an instance has received.
  void add_tenant_gpus(TenantId tenant, std::int64_t gpus) { tenant_gpus_[index(tenant)] += static_cast<std::uint32_t>(gpus); }
  void attain(InstanceId instance, double gpu_s) {
    attained_s_[index(instance)] += gpu_s;
    attained_changed_.push_back(instance);
  }
  // ClusterView::attained_changed: what a round's view lists, and after the round, those it listed dropped
  // (a preemption the round carries out adds to the next round's).
  std::size_t attained_changes() const { return attained_changed_.size(); }
  void drop_attained_changes(std::size_t listed) {
    attained_changed_.erase(attained_changed_.begin(), attained_changed_.begin() + static_cast<std::ptrdiff_t>(listed));
  }
  // The tasks holding GPUs now, as policies see them: a task's entry is replaced when it is resized.
  void set_running(const RunningTask& task);
  // The running task's run pays `resume_s` of restore from `from_s` (RunningTask::resume_s).
  void set_resume(TaskId task, double from_s, double resume_s);
  void stop_running(TaskId task);
  // Whether the tenant's GPUs (with MIG: physical GPUs) are its own.
  bool private_tenant(TenantId tenant) const { return tenant_private_[index(tenant)] != 0; }
  // Free GPUs over the whole cluster; GPUs running at least one task.
  std::uint32_t free_gpus() const { return free_total_; }
  std::uint32_t gpus_running() const;

 private:
  void occupied(std::uint32_t gpu);
  void refresh(std::uint32_t gpu);
  void add_free(std::uint32_t node, int delta);

  const Scenario& sc_;
  const Cluster& cluster_;
  const Trace& trace_;
  bool& round_wanted_;
  std::vector<std::vector<std::uint32_t>> gpu_tasks_;  // per GPU: the tasks running on it
  std::vector<std::uint8_t> slots_;                    // per GPU: how many tasks it may run at once
  std::vector<std::uint8_t> gpu_busy_, gpu_down_, gpu_off_, gpu_held_;
  std::vector<std::int32_t> gpu_rank_;     // per GPU: preemption rank of what runs there (ClusterView::kNoRank: none)
  std::vector<double> gpu_started_;        // when that task started
  std::vector<std::int32_t> gpu_tenant_;   // tenant of the first task there (-1: none)
  std::vector<double> gpu_free_at_;
  std::vector<std::uint32_t> free_per_node_;
  std::uint32_t free_total_ = 0;           // the sum of free_per_node_, asked for every round
  std::vector<std::uint64_t> free_nodes_;  // bit per node: it has a free GPU (policies skip full nodes)
  std::vector<std::uint32_t> tenant_gpus_;
  std::vector<double> tenant_quota_;
  std::vector<std::uint8_t> tenant_private_;
  std::vector<std::uint8_t> tenant_node_allowed_;
  std::vector<double> attained_s_;
  std::vector<InstanceId> attained_changed_;  // since the last round
  std::vector<RunningTask> running_;
  std::vector<std::uint32_t> running_slot_;  // per task: its entry in running_, kNotRunning when none
  static constexpr std::uint32_t kNotRunning = 0xFFFFFFFFu;
};

}  // namespace fleetsim::run
