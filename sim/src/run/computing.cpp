#include "computing.hpp"

#include <algorithm>

namespace fleetsim::run {
namespace {

// Per GPU: its interference where it is time-sliced, else SharedCompute::kExclusive.
std::vector<double> interference(const Cluster& cluster) {
  std::vector<double> f;
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    const NodeGroup& group = cluster.group(cluster.node_of(make_id<GpuId>(g)));
    f.push_back(group.time_sliced_tasks > 1 ? group.interference : SharedCompute::kExclusive);
  }
  return f;
}

// Per node: the memory bandwidth and compute its devices share.
std::vector<NodeShares::Capacity> node_shares(const Cluster& cluster) {
  std::vector<NodeShares::Capacity> shares;
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeType& node = cluster.group(make_id<NodeId>(n)).node;
    shares.push_back({.bus_Bps = node.memory_bus_Bps, .compute_devices = node.compute_pool_devices});
  }
  return shares;
}

void record_parts(TaskRecord& r, const ComputeEstimate& e) {
  r.compute_bound_s = e.compute_part_s();
  r.memory_bound_s = e.memory_part_s();
  r.fixed_s = e.launch_s;
}

}  // namespace

Computing::Computing(const Scenario& scenario, const Cluster& cluster, const ComputeModel& compute, Trace& trace,
                     Occupancy& occupancy, Recovery& recovery, EventQueue& queue, bool restartable)
    : sc_(scenario),
      cluster_(cluster),
      compute_(compute),
      trace_(trace),
      occupancy_(occupancy),
      recovery_(recovery),
      queue_(queue),
      shared_(interference(cluster)),
      node_shares_(node_shares(cluster)),
      stamped_(restartable || shared_.any() || node_shares_.any()) {}

void Computing::size_tasks(const RecordCounts& n) {
  grow(parts_left_, n.tasks, n.most_tasks, std::uint8_t{0});
  grow(begun_, n.tasks, n.most_tasks, std::uint8_t{0});
  if (stamped_) grow(stamp_, n.tasks, n.most_tasks, 0u);
}

void Computing::start(TaskId id, double known_scale) {
  TaskRecord& r = trace_.task(id);
  const TaskSpec& s = sc_.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count);
  r.compute_start_s = queue_.now();
  const double share = r.work_scale / static_cast<double>(r.gpu_count);
  double compute_s = 0;
  ComputeEstimate slowest;
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
    const ComputeEstimate e = compute_.of(s, cluster_.gpu_type(trace_.gpus[r.gpu_begin + i]), share);
    if (i == 0 || e.total_s() > compute_s) {
      record_parts(r, e);
      slowest = e;
    }
    compute_s = std::max(compute_s, e.total_s());
  }
  if (recovery_.restart_pending(id) && r.restarts < UINT16_MAX) ++r.restarts;
  if (recovery_.on()) {
    compute_s = recovery_.begin_compute(id, compute_s, s.elastic ? s.elastic->restart_s : 0, r.gpu_count);
    if (recovery_.resume_s(id) > 0) occupancy_.set_resume(id, r.compute_start_s, recovery_.resume_s(id));
  }
  // Policies predict with the declared work (a trace job's duration), not a random draw.
  const double known = known_scale / static_cast<double>(r.gpu_count);
  double predicted_s = 0;
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
    const GpuType& type = cluster_.gpu_type(trace_.gpus[r.gpu_begin + i]);
    predicted_s = std::max(predicted_s, compute_.of(s, type, known).total_s());
  }
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
    occupancy_.set_free_at(index(trace_.gpus[r.gpu_begin + i]), r.compute_start_s + predicted_s);
  }
  parts_left_[index(id)] = static_cast<std::uint8_t>(1 + collectives_of(id).size());
  begun_[index(id)] = 0;
  run(id, compute_s, slowest);
}

void Computing::start_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate) {
  const double compute_s = estimate.total_s();
  for (TaskId m : members) {
    TaskRecord& r = trace_.task(m);
    r.compute_start_s = queue_.now();
    record_parts(r, estimate);
    parts_left_[index(m)] = 1;
    begun_[index(m)] = 0;
    if (recovery_.on()) recovery_.set_full_compute(m, compute_s);
  }
  run(members.front(), compute_s, estimate);
  occupancy_.set_free_at(index(trace_.gpus[trace_.task(members.front()).gpu_begin]), queue_.now() + compute_s);
}

void Computing::run(TaskId id, double compute_s, const ComputeEstimate& per_device) {
  const TaskRecord& r = trace_.task(id);
  const std::span<const GpuId> gpus(trace_.gpus.data() + r.gpu_begin, r.gpu_count);
  if (shared_.any() && std::any_of(gpus.begin(), gpus.end(), [&](GpuId g) { return shared_.shared(g); })) {
    shared_.start(index(id), gpus, compute_s, queue_.now(), changed_);
    repace(changed_);
    return;
  }
  if (node_shares_.any() && std::any_of(gpus.begin(), gpus.end(), [&](GpuId g) { return node_shares_.on(cluster_.node_of(g)); })) {
    nodes_.clear();
    for (GpuId g : gpus) nodes_.push_back(cluster_.node_of(g));
    // What is not the estimate's core (a restore, a restart) is fixed time, as its launches are; a run
    // shorter than the estimate (resumed from a checkpoint) has no more core than it runs.
    const double estimated_core_s = per_device.total_s() - per_device.launch_s;
    const double core_s = std::min(estimated_core_s, compute_s);
    const double bytes = per_device.memory_s * cluster_.gpu_type(gpus[0]).memory_bandwidth_Bps;
    node_shares_.start(index(id), nodes_,
                       {.launch_s = std::max(0.0, compute_s - estimated_core_s), .core_s = core_s, .bytes = bytes,
                        .compute_s = std::min(per_device.flop_s, core_s)},
                       queue_.now(), changed_);
    repace(changed_);
    return;
  }
  queue_.push(queue_.now() + compute_s, event(kComputeDone, id), index(id));
  for_each_overlapped(id, [&](double overlap) { queue_.push(queue_.now() + (1 - overlap) * compute_s, event(kCommStart, id), index(id)); });
}

std::span<const CollectiveSpec> Computing::collectives_of(TaskId id) const {
  const TaskRecord& r = trace_.task(id);
  if (r.gpu_count <= 1) return {};
  return sc_.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count).collectives;
}

template <typename Due>
void Computing::for_each_overlapped(TaskId id, Due due) const {
  const std::span<const CollectiveSpec> collectives = collectives_of(id);
  for (std::size_t k = 0; k < collectives.size(); ++k) {
    if (collectives[k].overlap > 0 && !begun(id, k)) due(collectives[k].overlap);
  }
}

// These tasks' paces changed: their pending compute ends (and collective starts) are stale.
void Computing::repace(const std::vector<std::uint32_t>& tasks) {
  for (std::uint32_t t : tasks) {
    const TaskId id = make_id<TaskId>(t);
    ++stamp_[t];
    queue_.push(reaches_s(t, 0), event(kComputeDone, id), t);
    for_each_overlapped(id, [&](double overlap) { queue_.push(reaches_s(t, overlap * work_s(t)), event(kCommStart, id), t); });
  }
}

std::uint8_t Computing::compute_done(TaskId id) {
  leave(id);
  const std::span<const CollectiveSpec> collectives = collectives_of(id);
  std::uint8_t now = 0;
  for (std::size_t k = 0; k < collectives.size(); ++k) {
    if (collectives[k].overlap == 0) now |= static_cast<std::uint8_t>(1u << k);
  }
  begun_[index(id)] |= now;
  return now;
}

// Overlapped collectives' events come due in the order of their overlaps, largest first (ties: by their
// place in the list), so the one due is the largest overlap not yet begun.
std::optional<std::uint32_t> Computing::collective_due(TaskId id) {
  std::optional<std::uint32_t> due;
  double most = 0;
  const std::span<const CollectiveSpec> collectives = collectives_of(id);
  for (std::uint32_t k = 0; k < collectives.size(); ++k) {
    if (collectives[k].overlap > most && !begun(id, k)) {
      due = k;
      most = collectives[k].overlap;
    }
  }
  if (due) begun_[index(id)] |= static_cast<std::uint8_t>(1u << *due);
  return due;
}

double Computing::computed_s(TaskId id, double now_s) const {
  if (shared_.computing(index(id))) return shared_.done_s(index(id), now_s);
  if (node_shares_.computing(index(id))) return node_shares_.done_s(index(id), now_s);
  return now_s - trace_.task(id).compute_start_s;
}

void Computing::leave(TaskId id) {
  if (shared_.computing(index(id))) {
    shared_.stop(index(id), queue_.now(), changed_);
  } else if (node_shares_.computing(index(id))) {
    node_shares_.stop(index(id), queue_.now(), changed_);
  } else {
    return;
  }
  repace(changed_);
}

void Computing::end_run(TaskId id) {
  ++stamp_[index(id)];
  parts_left_[index(id)] = 0;
  begun_[index(id)] = 0;
}

}  // namespace fleetsim::run
