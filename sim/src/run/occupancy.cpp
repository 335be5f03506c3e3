#include "occupancy.hpp"

#include <algorithm>

namespace fleetsim::run {

Occupancy::Occupancy(const Scenario& sc, const Cluster& cluster, const Trace& trace, bool& round_wanted)
    : sc_(sc), cluster_(cluster), trace_(trace), round_wanted_(round_wanted) {
  const std::uint32_t gpus = cluster_.gpu_count();
  gpu_tasks_.resize(gpus);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    slots_.push_back(static_cast<std::uint8_t>(cluster_.group(cluster_.node_of(make_id<GpuId>(g))).time_sliced_tasks));
  }
  gpu_busy_.assign(gpus, 0);
  gpu_down_.assign(gpus, 0);
  gpu_off_.assign(gpus, 0);
  gpu_held_.assign(gpus, 0);
  gpu_rank_.assign(gpus, ClusterView::kNoRank);
  gpu_started_.assign(gpus, 0.0);
  gpu_tenant_.assign(gpus, -1);
  gpu_free_at_.assign(gpus, 0.0);
  free_nodes_.assign((cluster_.node_count() + 63) / 64, 0);
  for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
    free_per_node_.push_back(0);
    add_free(n, static_cast<int>(cluster_.gpus_in(make_id<NodeId>(n))));
  }
  tenant_gpus_.assign(sc_.tenants.size(), 0);
  for (const Tenant& t : sc_.tenants) {
    tenant_quota_.push_back(t.quota);
    tenant_private_.push_back(t.private_gpus ? 1 : 0);
  }
  tenant_node_allowed_ = tenant_node_allowed(sc_.tenants, cluster_.node_count());
}

ClusterView Occupancy::view(const GpuMemory& memory, const ComputeModel& compute, std::span<const double> job_sizes,
                            double now_s) const {
  return ClusterView(cluster_, memory, compute,
                     {gpu_busy_, free_per_node_, free_nodes_, gpu_free_at_, tenant_gpus_, tenant_quota_, attained_s_, job_sizes,
                      tenant_node_allowed_, gpu_rank_, gpu_started_, gpu_tenant_, tenant_private_, running_, &free_total_,
                      attained_changed_},
                     now_s);
}

void Occupancy::add_task(std::uint32_t gpu, std::uint32_t task) {
  gpu_tasks_[gpu].push_back(task);
  occupied(gpu);
}

void Occupancy::remove_task(std::uint32_t gpu, std::uint32_t task) {
  std::erase(gpu_tasks_[gpu], task);
  occupied(gpu);
}

void Occupancy::set_running(const RunningTask& task) {
  const std::uint32_t t = index(task.task);
  if (t >= running_slot_.size()) running_slot_.resize(t + 1, kNotRunning);
  if (running_slot_[t] == kNotRunning) {
    running_slot_[t] = static_cast<std::uint32_t>(running_.size());
    running_.push_back(task);
  } else {
    running_[running_slot_[t]] = task;
  }
}

void Occupancy::set_resume(TaskId task, double from_s, double resume_s) {
  const std::uint32_t t = index(task);
  if (t >= running_slot_.size() || running_slot_[t] == kNotRunning) return;
  RunningTask& r = running_[running_slot_[t]];
  r.resume_from_s = from_s;
  r.resume_s = resume_s;
}

void Occupancy::stop_running(TaskId task) {
  const std::uint32_t t = index(task);
  if (t >= running_slot_.size() || running_slot_[t] == kNotRunning) return;
  const std::uint32_t slot = running_slot_[t];
  running_slot_[index(running_.back().task)] = slot;
  running_[slot] = running_.back();
  running_.pop_back();
  running_slot_[t] = kNotRunning;
}

void Occupancy::set_down(std::uint32_t gpu, bool down) {
  gpu_down_[gpu] = down ? 1 : 0;
  refresh(gpu);
}

void Occupancy::set_off(std::uint32_t gpu, bool off) {
  gpu_off_[gpu] = off ? 1 : 0;
  refresh(gpu);
}

void Occupancy::set_held(std::uint32_t gpu, bool held) {
  gpu_held_[gpu] = held ? 1 : 0;
  refresh(gpu);
}

std::uint32_t Occupancy::gpus_running() const {
  return static_cast<std::uint32_t>(std::count_if(gpu_tasks_.begin(), gpu_tasks_.end(), [](const auto& t) { return !t.empty(); }));
}

// What policies see of a GPU's tasks: the highest preemption rank, the latest start, the first
// task's tenant (co-runners never conflict: each was allowed beside the others).
void Occupancy::occupied(std::uint32_t g) {
  gpu_rank_[g] = ClusterView::kNoRank;
  gpu_tenant_[g] = -1;
  for (std::uint32_t t : gpu_tasks_[g]) {
    const TaskRecord& r = trace_.task(make_id<TaskId>(t));
    const Tenant& tenant = sc_.tenants[index(r.tenant)];
    const std::int32_t rank = ClusterView::rank_of(tenant.priority, tenant.work_class == WorkClass::interactive);
    const bool first = t == gpu_tasks_[g].front();
    gpu_rank_[g] = first ? rank : std::max(gpu_rank_[g], rank);
    gpu_started_[g] = first ? r.start_s : std::max(gpu_started_[g], r.start_s);
    if (first) gpu_tenant_[g] = static_cast<std::int32_t>(index(r.tenant));
  }
  refresh(g);
}

void Occupancy::refresh(std::uint32_t g) {
  const std::uint8_t busy = gpu_tasks_[g].size() >= slots_[g] || gpu_down_[g] != 0 || gpu_off_[g] != 0 || gpu_held_[g] != 0;
  if (busy == gpu_busy_[g]) return;
  gpu_busy_[g] = busy;
  const std::uint32_t n = index(cluster_.node_of(make_id<GpuId>(g)));
  if (busy != 0) {
    add_free(n, -1);
  } else {
    add_free(n, +1);
    round_wanted_ = true;
  }
}

void Occupancy::add_free(std::uint32_t n, int delta) {
  free_per_node_[n] += static_cast<std::uint32_t>(delta);
  free_total_ += static_cast<std::uint32_t>(delta);
  if (free_per_node_[n] > 0) {
    free_nodes_[n / 64] |= std::uint64_t{1} << (n % 64);
  } else {
    free_nodes_[n / 64] &= ~(std::uint64_t{1} << (n % 64));
  }
}

}  // namespace fleetsim::run
