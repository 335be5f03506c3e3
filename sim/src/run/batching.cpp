#include "batching.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "events.hpp"
#include "fleetsim/memory.hpp"
#include "slots.hpp"

namespace fleetsim::run {

// A task whose work is FLOP and bytes batches only with instances of itself.
Batching::Batching(const Scenario& sc, const Cluster& cluster, const Trace& trace, const Predictions& predicted,
                   const ComputeModel& compute, const Occupancy& occupancy, const GpuMemory& memory, EventQueue& queue,
                   bool& round_wanted)
    : sc_(sc),
      cluster_(cluster),
      trace_(trace),
      predicted_(predicted),
      compute_(compute),
      occupancy_(occupancy),
      memory_(memory),
      queue_(queue),
      round_wanted_(round_wanted) {
  std::map<std::tuple<std::uint32_t, std::string, std::uint32_t, double, double>, std::uint32_t> shared;
  std::uint32_t keys = 0;
  for (std::uint32_t w = 0; w < sc.workflows.size(); ++w) {
    auto& of = key_of_.emplace_back();
    for (std::uint32_t t = 0; t < sc.workflows[w].tasks.size(); ++t) {
      const TaskSpec& s = sc.workflows[w].tasks[t];
      const std::uint32_t model = predicted.model(w, t);
      const std::string work = work_identity(s);
      if (!s.batching || work.empty() || model == kNoModel) {
        of.push_back(keys++);
        continue;
      }
      const auto key = std::tuple{model, work, s.batching->max_size, s.batching->max_wait_s, s.batching->shared_bytes};
      const auto [it, added] = shared.emplace(key, keys);
      if (added) ++keys;
      of.push_back(it->second);
    }
  }
  held_.resize(keys);
  hold_deadline_.assign(keys, 0.0);
}

std::string Batching::work_identity(const TaskSpec& s) {
  if (!s.op.empty() || !s.architecture) return s.op;
  const StepShape& a = s.shape;
  // A decode in tiles is other work than the same decode whole: the tiles are part of it.
  char text[320];
  std::snprintf(text, sizeof text, "%s/%g/%g/%g/%g/%g/%g/%s/%s/%s/%g %g %g %g %.17g", s.architecture->id.c_str(), a.width, a.height, a.frames, a.tokens,
                a.context, s.steps, std::string(dtype_name(s.dtype)).c_str(), std::string(runtime_name(a.runtime)).c_str(),
                std::string(attention_backend_name(a.attention)).c_str(), a.tiles.size,
                a.tiles.overlap, a.tiles.frames, a.tiles.frame_overlap, a.tiles.vram_below);
  return text;
}

bool Batching::hold(std::uint32_t key, const ReadyTask& task, ReadyQueue& ready) {
  const auto& batching = task.spec->batching;
  if (!batching || batching->max_wait_s <= 0) return false;
  held_[key].push_back(task);
  if (held_[key].size() >= batching->max_size) {
    release(key, ready);
  } else if (held_[key].size() == 1) {
    hold_deadline_[key] = queue_.now() + batching->max_wait_s;
    queue_.push(hold_deadline_[key], kBatchRelease, key);
  }
  return true;
}

bool Batching::release_due(std::uint32_t key, ReadyQueue& ready) {
  if (held_[key].empty() || queue_.now() < hold_deadline_[key]) return false;
  release(key, ready);
  return true;
}

void Batching::release(std::uint32_t key, ReadyQueue& ready) {
  ready.append(held_[key]);
  held_[key].clear();
  round_wanted_ = true;
}

void Batching::forget(TaskId task) {
  for (auto& held : held_) std::erase_if(held, [&](const ReadyTask& r) { return r.task == task; });
}

std::uint32_t Batching::open(TaskId leader) {
  const std::uint32_t slot = take_slot(batches_, free_batches_);
  batches_[slot].members.assign(1, leader);
  batch_of_[index(leader)] = slot;
  return slot;
}

void Batching::join(std::uint32_t batch, TaskId member) {
  batches_[batch].members.push_back(member);
  batch_of_[index(member)] = batch;
}

void Batching::dissolve(TaskId member) {
  const std::uint32_t slot = batch_of_[index(member)];
  if (slot == kNone) return;
  for (TaskId m : batches_[slot].members) batch_of_[index(m)] = kNone;
  free_batches_.push_back(slot);
}

const TaskSpec& Batching::spec(TaskId task) const {
  const TaskRecord& r = trace_.task(task);
  return sc_.workflows[r.workflow].tasks[r.task];
}

void Batching::fill(TaskId leader, PolicyRound& round, BatchHost& host) {
  const TaskRecord& lead = trace_.task(leader);
  const TaskSpec& s = spec(leader);
  const GpuId g = trace_.gpus[lead.gpu_begin];
  const std::uint32_t k = key(lead);
  const std::uint32_t slot = open(leader);
  const std::uint32_t model = predicted_.model(lead.workflow, lead.task);
  const double weights = s.weights_bytes;
  ReadyQueue& ready = round.ready();
  for (std::size_t i = 0; i < ready.size() && members(slot).size() < s.batching->max_size; ++i) {
    const TaskId f = ready[i].task;
    const TaskRecord& r = trace_.task(f);
    if (round.decided(i) || key(r) != k) continue;
    if (!host.view().allowed(r.tenant, g) || (r.tenant != lead.tenant && (occupancy_.private_tenant(r.tenant) || occupancy_.private_tenant(lead.tenant)))) continue;
    // Members of other workflows may need more or less working set.
    if (!memory_.fits(g, model, weights, spec(f).working_set_on(memory_.capacity(g)))) break;
    round.decide(i);
    host.place_member(f, leader, g);
    join(slot, f);
    if (round.recording()) round.record(DecisionKind::placed, f, "batched with task \"" + s.name + "\"");
    host.send_inputs(f, g);
  }
  // Members whose inputs are still on their way hold the batch back.
  const std::vector<TaskId>& joined = members(slot);
  const auto waiting = static_cast<std::uint32_t>(std::count_if(joined.begin(), joined.end(), [&](TaskId m) { return host.inputs_pending(m); }));
  batches_[slot].waiting = waiting;
  if (waiting == 0) start(slot, host);
}

void Batching::member_ready(TaskId member, BatchHost& host) {
  if (const std::uint32_t slot = batch_of(member); --batches_[slot].waiting == 0) start(slot, host);
}

// The members' FLOP add up; of their bytes, the shared part is read once (the largest member's), the
// rest by each member. A model step runs once at the batch's size.
void Batching::start(std::uint32_t batch, BatchHost& host) {
  const std::vector<TaskId>& joined = members(batch);
  const TaskRecord& lead = trace_.task(joined.front());
  const TaskSpec& s = spec(joined.front());
  double flop = 0, own_bytes = 0, largest_bytes = 0;
  for (TaskId m : joined) {
    const TaskRecord& r = trace_.task(m);
    flop += spec(m).flop * r.work_scale;
    own_bytes += spec(m).bytes * r.work_scale;
    largest_bytes = std::max(largest_bytes, spec(m).bytes * r.work_scale);
  }
  const double bytes = s.batching->shared_bytes * largest_bytes + (1 - s.batching->shared_bytes) * own_bytes;
  const GpuType& gpu = cluster_.gpu_type(trace_.gpus[lead.gpu_begin]);
  host.compute_batch(joined, s.architecture ? compute_.batched(s, gpu, flop / s.flop) : estimate_compute(gpu, flop, bytes, s.dtype, s.launches));
}

}  // namespace fleetsim::run
