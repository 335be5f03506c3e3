#include "policy_round.hpp"

#include <algorithm>

#include "fleetsim/units.hpp"

namespace fleetsim::run {

std::unique_ptr<Policy> PolicyRound::make_policy(const Scenario& scenario) {
  const PolicyInfo* info = find_policy(scenario.policy.name);
  FLEETSIM_CHECK(info != nullptr, "policy checked at load");
  return info->make(scenario.policy.params);
}

PolicyRound::PolicyRound(const Scenario& scenario, std::unique_ptr<Policy> policy, const Cluster& cluster, const Occupancy& occupancy,
                         const GpuMemory& memory, const Predictions& predicted, Trace& trace, const EventQueue& queue,
                         bool record_decisions)
    : sc_(scenario),
      cluster_(cluster),
      occupancy_(occupancy),
      memory_(memory),
      predicted_(predicted),
      trace_(trace),
      queue_(queue),
      record_decisions_(record_decisions),
      policy_(std::move(policy)) {}

const TaskSpec& PolicyRound::spec(TaskId task) const {
  const TaskRecord& r = trace_.task(task);
  return sc_.workflows[r.workflow].tasks[r.task];
}

std::string PolicyRound::label(TaskId task) const {
  const TaskRecord& r = trace_.task(task);
  return "task \"" + spec(task).name + "\" of workflow \"" + sc_.workflows[r.workflow].id + "\" (instance " +
         std::to_string(index(r.instance)) + ")";
}

void PolicyRound::reject(TaskId task, const std::string& why) const {
  throw PolicyError("policy \"" + sc_.policy.name + "\" placed " + label(task) + " " + why);
}

void PolicyRound::record(DecisionKind kind, TaskId task, const std::string& reason) {
  if (!record_decisions_) return;
  const TaskRecord& r = trace_.task(task);
  const bool has_gpus = r.status == TaskStatus::running;
  trace_.decisions.push_back({queue_.now(), kind, task, has_gpus ? r.gpu_begin : 0, has_gpus ? r.gpu_count : 0,
                              reason.empty() ? 0 : trace_.add_reason(reason)});
}

void PolicyRound::record_node(DecisionKind kind, NodeId node, const std::string& reason) {
  if (!record_decisions_) return;
  trace_.decisions.push_back({queue_.now(), kind, TaskId{}, 0, 0, reason.empty() ? 0 : trace_.add_reason(reason), node});
}

bool PolicyRound::play(RoundHost& host, const std::vector<RunListener*>& listeners) {
  bool placed_and_waiting = false;
  decisions_.clear();
  // With every GPU busy, most policies could only hold every task: their part of the round is skipped.
  const bool idle = policy_->idle_when_full() && occupancy_.free_gpus() == 0;
  if (!ready_.empty()) for (RunListener* l : listeners) l->round_begins(ready_.tasks());
  if (!ready_.empty() && !idle) {
    const ClusterView view = host.view();
    policy_->schedule(view, ready_.tasks(), decisions_);
    for (const Decisions::Placement& p : decisions_.placements()) {
      const TaskId task = claim(p.ready_index);
      check_placement(task, decisions_.gpus(p), host.view());
      host.start(task, decisions_.gpus(p));
      record(DecisionKind::placed, task, {});
    }
    for (const Decisions::Failure& f : decisions_.failures()) {
      const TaskId task = claim(f.ready_index);
      record(DecisionKind::failed, task, f.reason);
      host.fail(task, "policy \"" + sc_.policy.name + "\": " + f.reason);
    }
    for (const Decisions::Placement& p : decisions_.placements()) {
      const TaskId leader = ready_[p.ready_index].task;
      if (spec(leader).batching && trace_.task(leader).status == TaskStatus::running) host.fill_batch(leader);
    }
    std::sort(decided_list_.begin(), decided_list_.end());
    for (std::uint32_t i : decided_list_) decided_[i] = 0;
    ready_.remove(decided_list_);
    decided_list_.clear();
    // Last, so that the stopped tasks join the ready queue after this round's bookkeeping.
    carry_out_preemptions(host);
    placed_and_waiting = !decisions_.placements().empty() && !ready_.empty();
  }
  for (RunListener* l : listeners) l->round_ends(ready_.tasks());
  return placed_and_waiting;
}

TaskId PolicyRound::claim(std::uint32_t ready_index) {
  if (ready_index >= ready_.size()) {
    throw PolicyError("policy \"" + sc_.policy.name + "\" decided on ready index " + std::to_string(ready_index) +
                      ", but only " + std::to_string(ready_.size()) + " tasks are ready");
  }
  if (decided(ready_index)) reject(ready_[ready_index].task, "twice in one round");
  decide(ready_index);
  return ready_[ready_index].task;
}

void PolicyRound::decide(std::size_t i) {
  if (decided_.size() <= i) decided_.resize(std::max(i + 1, ready_.size()), 0);
  decided_[i] = 1;
  decided_list_.push_back(static_cast<std::uint32_t>(i));
}

void PolicyRound::check_placement(TaskId task, std::span<const GpuId> gpus, const ClusterView& view) const {
  if (const std::string why = placement_problem(task, gpus, {}, view); !why.empty()) reject(task, why);
}

void PolicyRound::check_resize(TaskId task, std::span<const GpuId> gang, std::span<const GpuId> kept, const ClusterView& view) const {
  const std::string why = placement_problem(task, gang, kept, view);
  FLEETSIM_CHECK(why.empty(), "the elastic component resized " + label(task) + " " + why);
}

std::string PolicyRound::placement_problem(TaskId task, std::span<const GpuId> gpus, std::span<const GpuId> kept,
                                           const ClusterView& view) const {
  const TaskSpec& s = spec(task);
  if (!s.runs_on(gpus.size())) {
    std::string sizes;
    for (std::uint32_t n : s.elastic ? s.elastic->sizes : std::vector<std::uint32_t>{}) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
    return "on " + std::to_string(gpus.size()) + " GPUs; it needs " + std::to_string(s.gpus) +
           (!sizes.empty() ? " or, elastic, one of " + sizes : s.elastic ? " or, elastic, at least " + std::to_string(s.elastic->min_gpus) : "");
  }
  const TaskRecord& r = trace_.task(task);
  const std::uint32_t model = predicted_.model(r.workflow, r.task);
  const double weights = s.weights_per_gpu_bytes();
  const auto keeps = [&](GpuId g) { return std::find(kept.begin(), kept.end(), g) != kept.end(); };
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuId g = gpus[i];
    if (index(g) >= cluster_.gpu_count()) return "on GPU " + std::to_string(index(g)) + ", which does not exist";
    // A task placed by a round may share a time-sliced GPU with a free slot; a resize grows onto idle GPUs only.
    if (!keeps(g) && (kept.empty() ? occupancy_.busy(index(g)) : !occupancy_.tasks_on(index(g)).empty())) {
      return "on GPU " + cluster_.gpu_name(g) + ", which is busy";
    }
    if (std::find(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(i), g) != gpus.begin() + static_cast<std::ptrdiff_t>(i)) {
      return "on GPU " + cluster_.gpu_name(g) + " twice";
    }
    if (!keeps(g) && !memory_.fits(g, model, weights, s.working_set_on(memory_.capacity(g)))) {
      const double need = memory_.least_need(g, model, weights, s.working_set_on(memory_.capacity(g)));
      return "on GPU " + cluster_.gpu_name(g) + ", which has " + format_quantity(memory_.available(g), Dimension::bytes) +
             " of VRAM available; it needs " + format_quantity(need, Dimension::bytes);
    }
  }
  for (GpuId g : gpus) {
    if (!keeps(g) && !view.allowed(r.tenant, g)) {
      return "on GPU " + cluster_.gpu_name(g) + ", which tenant \"" + sc_.tenants[index(r.tenant)].name +
             "\" may not use (pinned nodes, nodes kept by an exclusive tenant, or a GPU shared with another tenant where one wants private GPUs)";
    }
  }
  return "";
}

void PolicyRound::carry_out_preemptions(RoundHost& host) {
  for (const Decisions::Preemption& p : decisions_.preemptions()) {
    const std::string by = "policy \"" + sc_.policy.name + "\" preempted ";
    if (!policy_->may_preempt()) throw PolicyError(by + "a task, but it does not declare that it may preempt");
    if (index(p.gpu) >= cluster_.gpu_count()) throw PolicyError(by + "GPU " + std::to_string(index(p.gpu)) + ", which does not exist");
    if (occupancy_.tasks_on(index(p.gpu)).empty()) {
      // A GPU of a gang stopped earlier in this loop (or named twice) is already free.
      if (std::find(freed_.begin(), freed_.end(), p.gpu) != freed_.end()) continue;
      throw PolicyError(by + "GPU " + cluster_.gpu_name(p.gpu) + ", which runs nothing");
    }
    // Every task on the GPU (several where it is time-sliced) is stopped.
    while (!occupancy_.tasks_on(index(p.gpu)).empty()) {
      const TaskId victim = make_id<TaskId>(occupancy_.tasks_on(index(p.gpu)).front());
      const TaskRecord& v = trace_.task(victim);
      freed_.insert(freed_.end(), trace_.gpus.begin() + v.gpu_begin, trace_.gpus.begin() + v.gpu_begin + v.gpu_count);
      record(DecisionKind::preempted, victim, p.reason);
      host.preempt(victim, p);
    }
  }
  freed_.clear();
}

}  // namespace fleetsim::run
