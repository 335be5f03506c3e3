#include "elastic.hpp"

#include <algorithm>
#include <limits>

#include "events.hpp"

namespace fleetsim::run {
namespace {

// Of a task's listed sizes (ascending), the largest that `gpus` GPUs hold, else the smallest.
std::uint32_t size_within(const std::vector<std::uint32_t>& sizes, std::uint32_t gpus) {
  const auto above = std::upper_bound(sizes.begin(), sizes.end(), gpus);
  return above == sizes.begin() ? sizes.front() : *(above - 1);
}

}  // namespace

Elastic::Elastic(const Scenario& sc, const Cluster& cluster, const Trace& trace, const Occupancy& occupancy, const GpuMemory& memory,
                 const SharedCompute& shared, const Predictions& predicted, EventQueue& queue, ElasticHost& host)
    : sc_(sc),
      cluster_(cluster),
      trace_(trace),
      occupancy_(occupancy),
      memory_(memory),
      shared_(shared),
      predicted_(predicted),
      queue_(queue),
      host_(host) {}

bool Elastic::any(const Scenario& sc) {
  for (const Workflow& wf : sc.workflows) {
    for (const TaskSpec& t : wf.tasks) {
      if (t.elastic) return true;
    }
  }
  return false;
}

// Tasks of listed sizes (training iterations) are not resized while they run: they are not listed.
void Elastic::task_started(TaskId id) {
  const TaskSpec& s = spec(trace_.task(id));
  if (!s.elastic || !s.elastic->sizes.empty() || listed_[index(id)] != 0) return;
  listed_[index(id)] = 1;
  running_.push_back(id);
}

// GPUs free now that the task could start on: its tenant may use them and its share fits VRAM.
std::uint32_t Elastic::free_gpus_for(const ReadyTask& t) const {
  const ClusterView v = host_.view();
  std::uint32_t free = 0;
  for (std::uint32_t g = 0; g < cluster_.gpu_count(); ++g) {
    const GpuId gpu = make_id<GpuId>(g);
    if (!occupancy_.busy(g) && v.allowed(t.tenant, gpu) && v.fits(gpu, t)) ++free;
  }
  return free;
}

// A waiting elastic task asks the policy for as many GPUs as are free for it once the tasks ahead of it
// in the ready queue have their gangs, within its range.
void Elastic::round_begins(std::span<ReadyTask> ready) {
  std::uint32_t ahead = 0;
  for (ReadyTask& t : ready) {
    if (t.spec->elastic) {
      const std::uint32_t free = free_gpus_for(t);
      t.gpus = std::clamp(free > ahead ? free - ahead : 0u, static_cast<std::uint32_t>(t.spec->elastic->min_gpus),
                          static_cast<std::uint32_t>(t.spec->gpus));
      // Listed sizes (a training job's DP degrees): the largest of them that many GPUs hold, else the smallest.
      if (!t.spec->elastic->sizes.empty()) t.gpus = size_within(t.spec->elastic->sizes, t.gpus);
    }
    ahead += t.gpus;
  }
}

// Computing alone and past its min_interval.
bool Elastic::resizable(TaskId id) const {
  const TaskRecord& r = trace_.task(id);
  return r.status == TaskStatus::running && r.compute_start_s != kNever && r.comm_start_s == kNever && host_.computing_alone(id) &&
         queue_.now() - gang_start_s(r) >= spec(r).elastic->min_interval_s;
}

// A task of listed sizes asks for its size in queue order, but a policy may place a task behind it first (by
// priority): where it is left waiting and the GPUs free for it now hold a smaller size than it asked for, a
// round follows at once, in which it asks for that size.
bool Elastic::asked_too_many(const ReadyTask& t) const {
  const std::vector<std::uint32_t>& sizes = t.spec->elastic->sizes;
  const std::uint32_t free = free_gpus_for(t);
  return free >= sizes.front() && size_within(sizes, free) < t.gpus;
}

void Elastic::round_ends(std::span<const ReadyTask> ready) {
  if (std::any_of(ready.begin(), ready.end(), [&](const ReadyTask& t) { return t.spec->elastic && !t.spec->elastic->sizes.empty() && asked_too_many(t); })) {
    queue_.push(queue_.now(), kSchedule, 0);
  }
  // Tasks that ended or were stopped leave the list; the rest in task order, for determinism.
  std::erase_if(running_, [&](TaskId id) {
    const bool gone = trace_.task(id).status != TaskStatus::running;
    if (gone) listed_[index(id)] = 0;
    return gone;
  });
  if (running_.empty()) return;
  std::sort(running_.begin(), running_.end());
  if (ready.empty()) {
    for (TaskId id : running_) grow(id);
  } else {
    shrink_for(ready.front());
  }
  for (TaskId id : running_) wake_when_resizable(id, !ready.empty());
}

// A task that could grow (nothing waits) or give GPUs back (something waits) but for its min_interval
// gets a scheduling round when the interval has passed, as nothing else may cause one.
void Elastic::wake_when_resizable(TaskId id, bool waiting) {
  const TaskRecord& r = trace_.task(id);
  const ElasticSpec& e = *spec(r).elastic;
  const bool could = waiting ? r.gpu_count > static_cast<std::uint32_t>(e.min_gpus) : r.gpu_count < static_cast<std::uint32_t>(spec(r).gpus);
  const double at = gang_start_s(r) + e.min_interval_s;
  if (!could || r.compute_start_s == kNever || at <= queue_.now() || at == wake_s_[index(id)] || at > sc_.horizon_s) return;
  wake_s_[index(id)] = at;
  queue_.push(at, kSchedule, 0);
}

// Onto free GPUs the task's share fits without offload: on its own nodes first, then in GPU order.
void Elastic::grow(TaskId id) {
  const TaskRecord& r = trace_.task(id);
  const TaskSpec& s = spec(r);
  if (r.gpu_count >= static_cast<std::uint32_t>(s.gpus) || !resizable(id)) return;
  const std::uint32_t model = predicted_.model(r.workflow, r.task);
  const double weights = s.weights_per_gpu_bytes();
  const ClusterView v = host_.view();
  const auto usable = [&](std::uint32_t g) {
    const GpuId gpu = make_id<GpuId>(g);
    return occupancy_.tasks_on(g).empty() && !occupancy_.busy(g) && !shared_.shared(gpu) && v.allowed(r.tenant, gpu) &&
           memory_.fits(gpu, model, weights, s.working_set_on(memory_.capacity(gpu))) &&
           memory_.offload_bytes(gpu, model, weights, s.working_set_on(memory_.capacity(gpu))) == 0;
  };
  const auto own_node = [&](std::uint32_t g) {
    const NodeId node = cluster_.node_of(make_id<GpuId>(g));
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
      if (cluster_.node_of(trace_.gpus[r.gpu_begin + i]) == node) return true;
    }
    return false;
  };
  gang_.assign(trace_.gpus.begin() + r.gpu_begin, trace_.gpus.begin() + r.gpu_begin + r.gpu_count);
  const std::size_t before = gang_.size();
  for (const bool near : {true, false}) {
    for (std::uint32_t g = 0; g < cluster_.gpu_count() && gang_.size() < static_cast<std::size_t>(s.gpus); ++g) {
      if (own_node(g) == near && usable(g)) gang_.push_back(make_id<GpuId>(g));
    }
  }
  if (gang_.size() == before) return;
  host_.resize(id, gang_, "grew from " + std::to_string(before) + " to " + std::to_string(gang_.size()) + " GPUs onto free ones");
}

// When the waiting task would have the GPUs it lacks without a resize: when the lacking-th of the busy
// GPUs it may use is predicted free (never, if too few are up).
double Elastic::predicted_wait_s(const ReadyTask& waiting, std::uint32_t lacking) {
  const ClusterView v = host_.view();
  free_at_.clear();
  for (std::uint32_t g = 0; g < cluster_.gpu_count(); ++g) {
    if (!occupancy_.tasks_on(g).empty() && v.allowed(waiting.tenant, make_id<GpuId>(g))) free_at_.push_back(occupancy_.free_at_s(g));
  }
  if (free_at_.size() < lacking) return std::numeric_limits<double>::infinity();
  std::nth_element(free_at_.begin(), free_at_.begin() + (lacking - 1), free_at_.end());
  return std::max(0.0, free_at_[lacking - 1] - queue_.now());
}

// Running elastic tasks give back GPUs the waiting task may use, as many as it lacks: the tasks with the
// most GPUs above their minimum first (ties: the later task), each its last gang members. A task gives
// GPUs back only when the waiting task would otherwise wait longer than its restart.
void Elastic::shrink_for(const ReadyTask& waiting) {
  const std::uint32_t free = free_gpus_for(waiting);
  if (free >= waiting.gpus) return;  // it waits for something else (VRAM, quota, the policy's choice)
  std::uint32_t lacking = waiting.gpus - free;
  const double wait_s = predicted_wait_s(waiting, lacking);
  const ClusterView v = host_.view();
  order_.clear();
  for (TaskId id : running_) {
    const TaskRecord& r = trace_.task(id);
    if (r.gpu_count > static_cast<std::uint32_t>(spec(r).elastic->min_gpus) && resizable(id) && wait_s > spec(r).elastic->restart_s) {
      order_.push_back(id);
    }
  }
  const auto above_min = [&](TaskId id) {
    const TaskRecord& r = trace_.task(id);
    return r.gpu_count - static_cast<std::uint32_t>(spec(r).elastic->min_gpus);
  };
  std::stable_sort(order_.begin(), order_.end(), [&](TaskId a, TaskId b) {
    return above_min(a) != above_min(b) ? above_min(a) > above_min(b) : index(a) > index(b);
  });
  for (TaskId id : order_) {
    if (lacking == 0) break;
    const TaskRecord& r = trace_.task(id);
    gang_.assign(trace_.gpus.begin() + r.gpu_begin, trace_.gpus.begin() + r.gpu_begin + r.gpu_count);
    std::uint32_t give = std::min(lacking, above_min(id));
    const std::size_t before = gang_.size();
    for (std::size_t i = gang_.size(); i-- > 0 && give > 0;) {
      if (!v.allowed(waiting.tenant, gang_[i])) continue;
      gang_.erase(gang_.begin() + static_cast<std::ptrdiff_t>(i));
      --give;
      --lacking;
    }
    if (gang_.size() == before) continue;
    host_.resize(id, gang_, "shrank from " + std::to_string(before) + " to " + std::to_string(gang_.size()) +
                                " GPUs: gave GPUs back for waiting " + host_.label(waiting.task));
  }
}

}  // namespace fleetsim::run
