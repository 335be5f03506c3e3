#include "tasks.hpp"

#include <algorithm>
#include <array>

#include "fleetsim/training.hpp"

namespace fleetsim::run {

Tasks::Tasks(const Scenario& scenario, const Cluster& cluster, const Topology& topology, GpuMemory& memory,
             const ComputeModel& compute, Flows& flows, Occupancy& occupancy, const Predictions& predicted, Workload& workload,
             Batching& batching, PolicyRound& round, EventQueue& queue, Trace& trace, const std::vector<RunListener*>& listeners,
             bool& round_wanted, bool restartable)
    : sc_(scenario),
      cluster_(cluster),
      topology_(topology),
      memory_(memory),
      compute_(compute),
      flows_(flows),
      occupancy_(occupancy),
      predicted_(predicted),
      workload_(workload),
      batching_(batching),
      round_(round),
      queue_(queue),
      trace_(trace),
      listeners_(listeners),
      round_wanted_(round_wanted),
      instance_gpus_(scenario.instance_placement == Scenario::InstancePlacement::one_gpu, occupancy),
      collectives_(cluster, topology),
      weights_(cluster, topology, memory, trace),
      tensors_(scenario, trace, workload, memory, [this](GpuId g) {
        round_wanted_ = true;  // the freed VRAM may let a waiting task start
        released(index(g));
      }),
      recovery_(scenario.faults, restartable),
      computing_(scenario, cluster, compute, trace, occupancy, recovery_, queue, restartable) {}

void Tasks::size_tasks(const RecordCounts& n) {
  grow(pending_flows_, n.tasks, n.most_tasks, 0u);
  recovery_.size_tasks(n);
  collectives_.size_tasks(n);
  computing_.size_tasks(n);
  tensors_.size_tasks(n);
}

std::string Tasks::no_route(std::uint32_t from, std::uint32_t to) const {
  return "link failures left no route from " + topology_.vertex_name(from) + " to " + topology_.vertex_name(to);
}

void Tasks::make_ready(TaskId id) {
  TaskRecord& r = trace_.task(id);
  r.ready_s = queue_.now();
  const TaskSpec& s = spec(r);
  const InstanceRecord& inst = trace_.instance(index(r.instance));
  // Where most of its input bytes are.
  const Workflow& wf = sc_.workflows[r.workflow];
  std::uint32_t input_gpu = kNoGpu;
  double input_bytes = 0, most = -1;
  for (std::uint32_t e : wf.inputs(r.task)) {
    input_bytes += wf.edges[e].bytes;
    if (wf.edges[e].bytes > most) {
      most = wf.edges[e].bytes;
      input_gpu = index(tensors_.holder(index(r.instance), e));
    }
  }
  const ReadyTask ready{id, r.instance, r.tenant, &s, static_cast<std::uint32_t>(s.gpus),
                        predicted_.model(r.workflow, r.task), s.weights_per_gpu_bytes(), s.working_set_bytes,
                        r.ready_s, inst.arrival_s, sc_.tenants[index(r.tenant)].priority,
                        sc_.tenants[index(r.tenant)].work_class == WorkClass::interactive, s.shape.tiles.vram_below > 0,
                        predicted_.rank_s(r.workflow, r.task) * known_scale(id),
                        predicted_.job_s(r.workflow) * known_scale(id), known_scale(id), input_gpu,
                        input_bytes, 0};
  // A batchable task may wait out of the policy's sight until its batch is full; one whose instance has
  // (or is about to have) a GPU of its own waits for that GPU.
  if (batching_.hold(batching_.key(r), ready, round_.ready())) return;
  if (instance_gpus_.on() && instance_gpus_.wait(index(r.instance), id)) {
    round_wanted_ = true;
    return;
  }
  round_.ready().push_back(ready);
  round_wanted_ = true;
}

bool Tasks::computing_alone(TaskId id) const {
  return pending_flows_[index(id)] == 0 && !collectives_.running(id) && !computing_.sharing(id);
}

void Tasks::start_on_instance_gpus() {
  // Taken first, then started: a task that does not fit fails its instance's waiting tasks with it.
  for (const auto& [id, g] : instance_gpus_.take_startable()) {
    const TaskRecord& r = trace_.task(id);
    if (!memory_.fits(g, predicted_.model(r.workflow, r.task), spec(r).weights_per_gpu_bytes(), spec(r).working_set_on(memory_.capacity(g)))) {
      fail_task(id, "it does not fit the VRAM left on " + cluster_.gpu_name(g) + ", the GPU its instance runs on (instance_placement one-gpu)");
      continue;
    }
    start_task(id, std::array{g});
    round_.record(DecisionKind::placed, id, "on its instance's GPU (instance_placement one-gpu)");
  }
}

ClusterView Tasks::view() const {
  return occupancy_.view(memory_, compute_, workload_.job_sizes(), queue_.now());
}

void Tasks::start_task(TaskId id, std::span<const GpuId> gpus) {
  TaskRecord& r = trace_.task(id);
  const TaskSpec& s = spec(r);
  const std::uint32_t model = predicted_.model(r.workflow, r.task);
  const double weights = s.weights_per_gpu_bytes();
  r.status = TaskStatus::running;
  r.start_s = queue_.now();
  for (GpuId g : gpus) {
    occupancy_.set_free_at(index(g), queue_.now() + predicted_.mean_s(r.workflow, r.task) * known_scale(id));
    occupancy_.add_task(index(g), index(id));
  }
  recovery_.started(id, queue_.now());
  if (s.on_sizes && r.task > 0) {
    // An elastic training job's workers restart where its world changes (torchrun's rendezvous): an iteration
    // placed on other GPUs than the one before it ran on.
    const TaskRecord& before = trace_.task(make_id<TaskId>(index(id) - 1));
    const std::span<const GpuId> held(trace_.gpus.data() + before.gpu_begin, before.gpu_count);
    if (!std::is_permutation(held.begin(), held.end(), gpus.begin(), gpus.end())) recovery_.restart_next(id);
  }
  occupancy_.add_tenant_gpus(r.tenant, static_cast<std::int64_t>(gpus.size()));
  r.gpu_begin = static_cast<std::uint32_t>(trace_.gpus.size());
  r.gpu_count = static_cast<std::uint32_t>(gpus.size());
  trace_.gpus.insert(trace_.gpus.end(), gpus.begin(), gpus.end());
  offloaded_.resize(trace_.gpus.size());
  occupancy_.set_running({id, r.instance, gpus[0], r.gpu_count, r.start_s, r.ready_s});
  if (instance_gpus_.on()) instance_gpus_.started(index(r.instance), index(gpus[0]));
  for (RunListener* l : listeners_) l->task_started(id);

  // Weights not resident are loaded (load_weights).
  for (std::uint32_t member = 0; member < gpus.size(); ++member) {
    const GpuId g = gpus[member];
    // What does not fit of the working set goes to host memory: out and back over the host link.
    const double working_set = s.working_set_on(memory_.capacity(g));
    const double offload = memory_.offload_bytes(g, model, weights, working_set);
    offloaded_[r.gpu_begin + member] = offload;
    if (offload > 0) {
      r.offload_bytes += offload;
      const std::uint32_t host = topology_.host_vertex(cluster_.node_of(g));
      start_flow(id, topology_.gpu_vertex(g), host, offload, FlowTag{FlowKind::offload, member * 2, id}, route_key(index(g), index(id)));
      start_flow(id, host, topology_.gpu_vertex(g), offload, FlowTag{FlowKind::offload, member * 2 + 1, id}, route_key(index(g), index(id)));
    }
    if (memory_.admit(g, model, weights, working_set - offload, queue_.now())) load_weights(id, member, g, model, weights);
  }
  start_inputs(id, gpus[0]);
  if (pending_flows_[index(id)] == 0 && !s.batching) start_compute(id);
}

// Weights not resident on `g` (member `member` of the task's gang) are loaded (see WeightLoads).
void Tasks::load_weights(TaskId id, std::uint32_t member, GpuId g, std::uint32_t model, double weights) {
  const FlowTag tag{FlowKind::weights, member, id};
  const std::uint32_t source = weights_.begin(tag.packed(), id, g, model, weights, queue_.now());
  start_flow(id, source, topology_.gpu_vertex(g), weights, tag, route_key(index(g), model));
}

// Batching forms the batch (run/batching); its members join through place_member and send_inputs.
void Tasks::fill_batch(TaskId leader) { batching_.fill(leader, round_, *this); }

void Tasks::place_member(TaskId member, TaskId leader, GpuId g) {
  TaskRecord& r = trace_.task(member);
  const double weights = spec(trace_.task(leader)).weights_bytes, working_set = spec(r).working_set_on(memory_.capacity(g));
  const std::uint32_t model = predicted_.model(r.workflow, r.task);
  r.status = TaskStatus::running;
  r.start_s = queue_.now();
  r.gpu_begin = static_cast<std::uint32_t>(trace_.gpus.size());
  r.gpu_count = 1;
  r.batched_with = index(leader) + 1;
  trace_.task(leader).batched_with = index(leader) + 1;
  trace_.gpus.push_back(g);
  offloaded_.resize(trace_.gpus.size());
  offloaded_.back() = memory_.offload_bytes(g, model, weights, working_set);
  memory_.admit(g, model, weights, working_set - offloaded_.back(), queue_.now());
  occupancy_.add_tenant_gpus(r.tenant, 1);
  recovery_.started(member, queue_.now());
}

void Tasks::send_inputs(TaskId member, GpuId g) {
  start_inputs(member, g);
}

bool Tasks::inputs_pending(TaskId member) const { return pending_flows_[index(member)] > 0; }

void Tasks::compute_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate) {
  computing_.start_batch(members, estimate);  // the leader's end ends its followers first
}

// Inputs move from each producer's first GPU to `to`, all at once. A tensor already there is read
// in place and released at once.
void Tasks::start_inputs(TaskId id, GpuId to) {
  TaskRecord& r = trace_.task(id);
  const Workflow& wf = sc_.workflows[r.workflow];
  for (std::uint32_t e : wf.inputs(r.task)) {
    const EdgeSpec& edge = wf.edges[e];
    const GpuId from = tensors_.holder(index(r.instance), e);
    if (from == to) {
      tensors_.release(index(r.instance), e, queue_.now());
      continue;
    }
    r.input_bytes += edge.bytes;
    start_flow(id, topology_.gpu_vertex(from), topology_.gpu_vertex(to), edge.bytes,
               FlowTag{FlowKind::input, e, id}, route_key(index(r.instance), e));
  }
}

void Tasks::start_flow(TaskId id, std::uint32_t from, std::uint32_t to, double bytes, FlowTag tag, std::uint64_t key) {
  if (!flows_.start(tag, from, to, bytes, key)) strand(id, no_route(from, to));
  ++pending_flows_[index(id)];
}

void Tasks::start_compute(TaskId id) {
  computing_.start(id, known_scale(id));
  const std::optional<ElasticSpec>& elastic = spec(trace_.task(id)).elastic;
  if (elastic && elastic->sizes.empty()) round_wanted_ = true;  // it can be resized from now on: a round looks at it
}

void Tasks::on_compute_done(TaskId id) {
  if (trace_.task(id).status != TaskStatus::running) return;  // failed meanwhile
  const std::uint8_t following = computing_.compute_done(id);
  if (const std::uint32_t slot = batching_.batch_of(id); slot != Batching::kNone) {
    batching_.dissolve(id);
    for (std::size_t i = 1; i < batching_.members(slot).size(); ++i) end_task(batching_.members(slot)[i]);
  }
  for (std::uint32_t k = 0; k < TaskSpec::kMaxCollectives; ++k) {
    if ((following >> k & 1u) == 0) continue;
    begin_collective(id, k);
    if (trace_.task(id).status != TaskStatus::running) return;  // the collective could not run
  }
  if (computing_.part_done(id)) end_task(id);
}

bool Tasks::on_collective_start(TaskId id) {
  const std::optional<std::uint32_t> due = computing_.collective_due(id);
  if (due) begin_collective(id, *due);
  return due.has_value();
}

void Tasks::begin_collective(TaskId id, std::uint32_t which) {
  TaskRecord& r = trace_.task(id);
  const TaskSpec& s = spec(r);
  const std::span<const GpuId> gang(trace_.gpus.data() + r.gpu_begin, r.gpu_count);
  const CollectiveSpec& collective = s.as_run_on(gang.size()).collectives[which];
  if (!collectives_.plays(collective, gang)) {  // split groups only, and none is: that part of the task is done
    if (computing_.part_done(id)) end_task(id);
    return;
  }
  if (r.comm_start_s == kNever) r.comm_start_s = queue_.now();
  if (const auto blocked = collectives_.begin(id, which, collective, gang)) {
    if (blocked->cut) {
      stop_task(id, blocked->reason);
    } else {
      abort_running(id, blocked->reason);
    }
    return;
  }
  start_collective_step(id, which);
}

// Starts the collective's current step, or, after its last one, ends that part of the task (the task
// with it, if it was the last).
void Tasks::start_collective_step(TaskId id, std::uint32_t which) {
  const std::vector<CollectiveFlow>* step = collectives_.next_step(id, which);
  if (step == nullptr) {
    if (computing_.part_done(id)) end_task(id);
    return;
  }
  for (const CollectiveFlow& f : *step) {
    const FlowTag tag{FlowKind::collective, which, id};
    if (!flows_.start(tag, f.from, f.to, f.bytes, (std::uint64_t{f.from} << 32) | f.to, f.latency_s, f.cap_Bps)) strand(id, no_route(f.from, f.to));
  }
  flows_.changed();
}

// The flows delivered now: a read input releases its tensor, loaded weights are resident, and a task
// whose last flow of a stage arrived goes on.
void Tasks::on_network() {
  for (const FlowDelivery& d : flows_.delivered()) {
    const FlowTag tag = FlowTag::of(d.tag);
    if (tag.kind == FlowKind::kv) continue;  // serving's (run/serving.hpp)
    const TaskId id = tag.task;
    if (tag.kind == FlowKind::collective) {
      if (collectives_.delivered(id, tag.part)) start_collective_step(id, tag.part);
      continue;
    }
    const TaskRecord& r = trace_.task(id);
    if (tag.kind == FlowKind::input) {
      tensors_.release(index(r.instance), tag.part, queue_.now());
    } else if (tag.kind == FlowKind::weights) {
      weights_.delivered(d.tag, predicted_.model(r.workflow, r.task), queue_.now());
    }
    if (--pending_flows_[index(id)] != 0) continue;
    if (batching_.batch_of(id) != Batching::kNone) {
      batching_.member_ready(id, *this);
    } else {
      start_compute(id);
    }
  }
}

void Tasks::strand(TaskId id, std::string why) { stranded_.push_back({id, recovery_.run(id), std::move(why)}); }

void Tasks::stop_stranded() {
  if (stranded_.empty()) return;
  std::vector<Stranded> stranded;
  stranded.swap(stranded_);
  for (const Stranded& s : stranded) {
    if (trace_.task(s.task).status == TaskStatus::running && recovery_.run(s.task) == s.run) stop_task(s.task, s.reason);
  }
}

// Output tensors held on a failed GPU are gone: consumers that have not read them cannot run.
// (No lineage: the producer is not run again.)
void Tasks::lose_tensors(GpuId g, const std::string& event) {
  tensors_.lose(g, [&](TaskId consumer, TaskId producer) {
    round_.ready().erase_if([&](const ReadyTask& r) { return r.task == consumer; });
    batching_.forget(consumer);
    fail_task(consumer, "its input from task \"" + spec(trace_.task(producer)).name + "\" was lost when " + event);
  });
}

// A failure stopped a running task, or the policy preempted it: its transfers are dropped, its GPUs
// freed, and it runs again from its last checkpoint: after the backoff while it has attempts left, or
// (preempted) at once, without using an attempt.
void Tasks::stop_task(TaskId id, const std::string& what, Stop how, double restore_s) {
  // A batch stops whole: its followers first, so the leader frees the GPU last.
  if (const std::uint32_t slot = batching_.batch_of(id); slot != Batching::kNone) {
    batching_.dissolve(id);
    for (std::size_t i = batching_.members(slot).size(); i-- > 0;) stop_task(batching_.members(slot)[i], what, how, restore_s);
    return;
  }
  TaskRecord& r = trace_.task(id);
  const double now = queue_.now();
  const bool preempted = how != Stop::failed;
  if (!preempted) round_.record(DecisionKind::stopped, id, what);
  dropped_.clear();
  flows_.cancel(id, now, dropped_);
  std::vector<GpuId> unloaded;
  for (std::uint64_t tag : dropped_) {
    if (FlowTag::of(tag).kind == FlowKind::weights) unloaded.push_back(weights_.cancelled(tag, now));
  }
  collectives_.drop(id);
  double saved_s = 0;
  RollBack rolled_back;
  const TaskSpec& s = spec(r);
  if (how == Stop::suspended) {
    saved_s = recovery_.suspend(id, r.compute_start_s != kNever ? computing_.computed_s(id, now) : 0, restore_s);
  } else if (s.training && s.training->checkpoint_every > 0) {
    rolled_back = roll_back(id, r, s);
  } else if (r.compute_start_s != kNever && recovery_.checkpoints()) {
    saved_s = recovery_.checkpoint(id, computing_.computed_s(id, now));
  }
  const double lost_gpu_s = (std::max(0.0, now - gang_start_s(r) - saved_s) + rolled_back.lost_s) * r.gpu_count;
  // The stopped run held its GPUs (a batch's members share its leader's; their runs are not kept).
  const bool kept_run = r.batched_with == 0;
  if (kept_run) trace_.left_gangs.push_back({id, gang_start_s(r), now, r.gpu_begin, r.gpu_count, true, rolled_back.happened, rolled_back.iterations});
  release_gpus(r);
  for (GpuId g : unloaded) memory_.drop_unloaded(g, predicted_.model(r.workflow, r.task), now);
  computing_.end_run(id);
  pending_flows_[index(id)] = 0;
  r.status = TaskStatus::queued;
  r.start_s = r.compute_start_s = r.comm_start_s = r.resized_s = kNever;
  r.gpu_count = 0;
  r.input_bytes = 0;
  r.offload_bytes = 0;
  r.batched_with = 0;
  if (const std::optional<double> again_s = recovery_.stopped(id, now, preempted, lost_gpu_s)) {
    queue_.push(*again_s, computing_.event(kRetry, id), index(id));
  } else {
    if (kept_run) trace_.left_gangs.back().rolled_back = false;  // no run comes back to the save
    fail_task(id, what + " " + recovery_.attempts(id));
  }
}

// A training job that keeps its own checkpoint goes back to the last one saved (after every `every`
// iterations; none yet: to its start): the iterations since, done on this gang's GPU type, are lost and
// computed again by the next run, after it reads the checkpoint back (and pays the scenario's restore).
Tasks::RollBack Tasks::roll_back(TaskId id, const TaskRecord& r, const TaskSpec& s) {
  const auto every = static_cast<std::uint32_t>(s.training->checkpoint_every);
  RollBack out{.happened = true, .iterations = r.task % every};  // done since the last save
  const TrainingIteration::OnGpu& on = s.training->on_gpu(cluster_.gpu_type(trace_.gpus[r.gpu_begin]));
  const double redo_s = out.iterations * on.compute_s * r.work_scale;
  const bool saved = r.task >= every;
  const Recovery::RolledBack back = recovery_.roll_back(id, redo_s + (saved ? on.checkpoint_load_s + sc_.faults.restore_s : 0));
  out.lost_s = (back.first ? redo_s : 0) + back.saved_lost_s;
  return out;
}

void Tasks::on_retry(TaskId id) {
  if (trace_.task(id).status == TaskStatus::queued) make_ready(id);
}

// Moves a computing elastic task onto `gang` (GPUs it keeps, in their order, then new ones). The
// work done is kept; it computes what is left at the new degree after its restart (and after the
// weights reach new GPUs). Not a stop: no attempt is used and nothing counts as lost.
void Tasks::resize(TaskId id, const std::vector<GpuId>& gang, const std::string& why) {
  TaskRecord& r = trace_.task(id);
  const TaskSpec& s = spec(r);
  const double now = queue_.now();
  round_.check_resize(id, gang, std::span<const GpuId>(trace_.gpus.data() + r.gpu_begin, r.gpu_count), view());
  recovery_.resized(id, now - r.compute_start_s);  // a new run, whose end, as a preemption's, uses no retry attempt
  trace_.left_gangs.push_back({id, gang_start_s(r), now, r.gpu_begin, r.gpu_count});
  occupancy_.attain(r.instance, served_gpu_s(r, now));
  computing_.end_run(id);  // the old run's compute and collective events are stale
  const std::uint32_t old_begin = r.gpu_begin, old_count = r.gpu_count;
  const auto old_member = [&](GpuId g) {
    for (std::uint32_t i = 0; i < old_count; ++i) {
      if (trace_.gpus[old_begin + i] == g) return i;
    }
    return old_count;
  };
  r.gpu_begin = static_cast<std::uint32_t>(trace_.gpus.size());
  r.gpu_count = static_cast<std::uint32_t>(gang.size());
  trace_.gpus.insert(trace_.gpus.end(), gang.begin(), gang.end());
  offloaded_.resize(trace_.gpus.size(), 0.0);
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
    if (const std::uint32_t m = old_member(gang[i]); m < old_count) offloaded_[r.gpu_begin + i] = offloaded_[old_begin + m];
  }
  for (std::uint32_t i = 0; i < old_count; ++i) {
    const GpuId g = trace_.gpus[old_begin + i];
    if (std::find(gang.begin(), gang.end(), g) == gang.end()) give_back_gpu(r, g, offloaded_[old_begin + i]);
  }
  const std::uint32_t model = predicted_.model(r.workflow, r.task);
  const double weights = s.weights_per_gpu_bytes();
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
    if (old_member(gang[i]) < old_count) continue;
    occupancy_.add_task(index(gang[i]), index(id));  // an idle GPU (PolicyRound::check_resize)
    if (memory_.admit(gang[i], model, weights, s.working_set_on(memory_.capacity(gang[i])), now)) load_weights(id, i, gang[i], model, weights);
  }
  occupancy_.add_tenant_gpus(r.tenant, static_cast<std::int64_t>(r.gpu_count) - old_count);
  r.resized_s = now;
  occupancy_.set_running({id, r.instance, gang[0], r.gpu_count, now, r.ready_s});
  r.compute_start_s = r.comm_start_s = kNever;
  round_.record(DecisionKind::resized, id, why);
  round_wanted_ = true;
  if (pending_flows_[index(id)] == 0) start_compute(id);
}

// One GPU of the task's gang is free again: at the task's end or stop (release_gpus), or when an
// elastic task leaves it at a resize.
void Tasks::give_back_gpu(const TaskRecord& r, GpuId g, double offloaded_bytes) {
  occupancy_.remove_task(index(g), index(trace_.id_of(r)));
  occupancy_.set_free_at(index(g), queue_.now());
  memory_.release(g, predicted_.model(r.workflow, r.task), spec(r).working_set_on(memory_.capacity(g)) - offloaded_bytes, queue_.now());
  released(index(g));
}

// Something left the GPU (a task, or a tensor it held): the features listening are told.
void Tasks::released(std::uint32_t g) {
  for (RunListener* l : listeners_) l->gpu_released(g);
}

// The GPU time the run gave its job up to now: the GPUs held, less the restore it paid (RunningTask::served_s;
// a batch pays none).
double Tasks::served_gpu_s(const TaskRecord& r, double now) const {
  const double restored_s = r.batched_with == 0 && r.compute_start_s != kNever ? std::clamp(now - r.compute_start_s, 0.0, recovery_.resume_s(trace_.id_of(r))) : 0.0;
  return (now - gang_start_s(r) - restored_s) * r.gpu_count;
}

void Tasks::release_gpus(const TaskRecord& r) {
  occupancy_.add_tenant_gpus(r.tenant, -static_cast<std::int64_t>(r.gpu_count));
  occupancy_.attain(r.instance, served_gpu_s(r, queue_.now()));
  // A batch's follower gives back its VRAM; the GPU is the leader's to free.
  const std::uint32_t self = index(trace_.id_of(r));
  if (r.batched_with != 0 && r.batched_with != self + 1) {
    const GpuId g = trace_.gpus[r.gpu_begin];
    memory_.release(g, predicted_.model(r.workflow, r.task), spec(r).working_set_on(memory_.capacity(g)) - offloaded_[r.gpu_begin], queue_.now());
    return;
  }
  computing_.leave(make_id<TaskId>(self));
  occupancy_.stop_running(make_id<TaskId>(self));
  for (std::uint32_t i = 0; i < r.gpu_count; ++i) give_back_gpu(r, trace_.gpus[r.gpu_begin + i], offloaded_[r.gpu_begin + i]);
  round_wanted_ = true;
}

void Tasks::end_task(TaskId id) {
  TaskRecord& r = trace_.task(id);
  r.status = TaskStatus::completed;
  r.end_s = queue_.now();
  release_gpus(r);
  for (TaskId consumer : tensors_.produced(id, queue_.now())) make_ready(consumer);
  if (workload_.task_ended(index(r.instance)) && instance_gpus_.on()) instance_gpus_.ended(index(r.instance));
}

// A running task that cannot go on: its GPUs are freed and it fails, with everything downstream.
void Tasks::abort_running(TaskId id, const std::string& reason) {
  TaskRecord& r = trace_.task(id);
  dropped_.clear();
  flows_.cancel(id, queue_.now(), dropped_);  // its other collectives, which may be running
  collectives_.drop(id);
  release_gpus(r);
  r.status = TaskStatus::queued;  // so fail_task takes it
  fail_task(id, reason);
}

// Fails a task that has not started, and every task downstream of it.
void Tasks::fail_task(TaskId id, const std::string& reason) {
  TaskRecord& r = trace_.task(id);
  if (r.status != TaskStatus::queued) return;
  r.status = TaskStatus::failed;
  r.end_s = queue_.now();
  r.reason = trace_.add_reason(reason);
  const std::uint32_t instance = index(r.instance);
  trace_.instance(instance).failed = true;
  tensors_.release_inputs(id, queue_.now());
  if (workload_.task_ended(instance) && instance_gpus_.on()) instance_gpus_.ended(instance);
  const Workflow& wf = sc_.workflows[r.workflow];
  const std::string downstream = "input from task \"" + wf.tasks[r.task].name + "\" failed";
  for (std::uint32_t e : wf.outputs(r.task)) fail_task(workload_.task_id(instance, wf.edges[e].to), downstream);
  if (instance_gpus_.on()) {
    for (TaskId waiting : instance_gpus_.drop_waiting(instance)) fail_task(waiting, "task \"" + wf.tasks[r.task].name + "\" of its instance failed (one GPU an instance: it fails as one prompt)");
  }
}

}  // namespace fleetsim::run
