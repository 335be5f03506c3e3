#include "fleetsim/simulation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "fleetsim/collective.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/invariants.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/units.hpp"
#include "run/autoscaler.hpp"
#include "run/batching.hpp"
#include "run/billing.hpp"
#include "run/collectives.hpp"
#include "run/elastic.hpp"
#include "run/events.hpp"
#include "run/faults.hpp"
#include "run/flows.hpp"
#include "run/occupancy.hpp"
#include "run/policy_round.hpp"
#include "run/predictions.hpp"
#include "run/recovery.hpp"
#include "run/slots.hpp"
#include "run/tensors.hpp"
#include "run/weight_loads.hpp"
#include "run/workload.hpp"
#include "shared_compute.hpp"

namespace fleetsim {
namespace {

using namespace run;  // event kinds

// What a task's pending flows are for.
enum class Stage : std::uint8_t { inputs, collective };

std::vector<double> vram_capacities(const Cluster& cluster) {
  std::vector<double> c;
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) c.push_back(cluster.gpu_type(make_id<GpuId>(g)).vram_bytes);
  return c;
}

// Per GPU: its interference where it is time-sliced, else SharedCompute::kExclusive.
std::vector<double> interference(const Cluster& cluster) {
  std::vector<double> f;
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    const NodeGroup& group = cluster.group(cluster.node_of(make_id<GpuId>(g)));
    f.push_back(group.time_sliced_tasks > 1 ? group.interference : SharedCompute::kExclusive);
  }
  return f;
}

class Run : public run::ElasticHost, public run::RoundHost {
 public:
  Run(const Scenario& scenario, const RunOptions& options)
      : sc_(scenario),
        seed_(options.seed.value_or(scenario.seed)),
        max_in_flight_(options.max_in_flight),
        restartable_(scenario.faults.any() || scenario.spot.any()),
        cluster_(scenario.cluster),
        topology_(cluster_, scenario.cluster.fabric),
        network_(topology_.capacities()),
        flows_(topology_, network_, queue_),
        collectives_(cluster_, topology_),
        memory_(vram_capacities(cluster_), sc_.max_offload),
        weights_(cluster_, topology_, memory_, trace_),
        occupancy_(scenario, cluster_, trace_, dirty_),
        billing_(scenario, cluster_, queue_, options.record_link_samples),
        predicted_(scenario, cluster_, compute_),
        workload_(sc_, seed_, predicted_.job_gpu_s(), queue_, trace_),
        tensors_(scenario, trace_, workload_, memory_, [this](GpuId g) {
          dirty_ = true;  // the freed VRAM may let a waiting task start
          released(index(g));
        }),
        faults_(scenario, cluster_, topology_, occupancy_, seed_, queue_),
        recovery_(scenario.faults),
        batching_(scenario, predicted_, queue_, dirty_),
        round_(scenario, run::PolicyRound::make_policy(scenario), cluster_, occupancy_, memory_, predicted_, trace_, queue_, options.record_link_samples),
        shared_(interference(cluster_)) {
    progress_cb_ = options.progress;
    network_.record_samples(options.record_link_samples);
    memory_.record_samples(options.record_link_samples);
    restartable_ = restartable_ || round_.may_preempt();  // a preempted task is stopped as a failure stops it
    restartable_ = restartable_ || run::Elastic::any(sc_);  // a resize restarts a run, keeping its progress as a checkpoint does
    if (sc_.autoscale.on()) {
      // A node going off loses what its host memory held.
      autoscaler_.emplace(sc_, cluster_, queue_, occupancy_, memory_, billing_, workload_, round_.ready(),
                          [this](std::uint32_t n) { weights_.host_lost(make_id<NodeId>(n)); });
      listeners_.push_back(&*autoscaler_);
    }
    if (run::Elastic::any(sc_)) {
      elastic_.emplace(sc_, cluster_, trace_, occupancy_, memory_, shared_, predicted_, queue_, *this);
      listeners_.push_back(&*elastic_);
    }
    size_task_state();
  }

  RunResult execute() {
    workload_.start_open_loops();
    faults_.start();
    start_billing();
    workload_.start_closed_loops();
    bool horizon_reached = false, diverged = false;
    double last_s = 0;
    std::uint64_t events = 0;
    // Random failures never run out: once every workflow has ended, only they would be left.
    while (!queue_.empty() && !diverged && !((restartable_ || autoscaler_) && workload_.unfinished() == 0)) {
      if (queue_.top().time_s > sc_.horizon_s) {
        horizon_reached = true;
        break;
      }
      const Event e = queue_.pop();
      event_digest_ = hash_combine(hash_combine(hash_combine(event_digest_, std::bit_cast<std::uint64_t>(e.time_s)), e.kind), e.subject);
      if ((++events & 0xFFFFu) == 0 && progress_cb_) progress_cb_(trace_.instances.size() - workload_.unfinished(), trace_.instances.size());
      const std::uint32_t run = stamp_of(e);
      bool live = true;  // stale events (see task_event) are skipped and do not extend the run
      switch (kind_of(e)) {
        case kArrival: workload_.arrive(e.subject, [this](TaskId id) { make_ready(id); }); break;
        case kComputeDone:
          if ((live = current(run, e.subject))) on_compute_done(make_id<TaskId>(e.subject));
          break;
        case kCommStart:
          if ((live = current(run, e.subject) && trace_.tasks[e.subject].status == TaskStatus::running)) {
            start_collective(make_id<TaskId>(e.subject));
          }
          break;
        case kFault: on_fault(e.subject); break;
        case kRepair: on_repair(e.subject); break;
        case kAutoscale: autoscaler_->on_decide(); break;
        case kNodeUp: autoscaler_->on_node_up(e.subject); break;
        case kBatchRelease:
          live = batching_.release_due(e.subject, round_.ready());
          break;
        case kRetry:
          if ((live = current(run, e.subject))) on_retry(make_id<TaskId>(e.subject));
          break;
        case kNetwork:
          if ((live = flows_.wake(e.subject))) on_network();
          break;
        case kSchedule: on_schedule(); break;
        default: FLEETSIM_CHECK(false, "unknown event kind");
      }
      if (live) last_s = e.time_s;
      if (!stranded_.empty()) stop_stranded();
      diverged = max_in_flight_ > 0 && workload_.in_flight() > max_in_flight_;
      flows_.arm();
      if (dirty_ && !schedule_pending_) {
        queue_.push(queue_.now(), kSchedule, 0);
        schedule_pending_ = true;
      }
    }
    const double end_s = horizon_reached ? sc_.horizon_s : last_s;
    // Nothing left to happen, yet tasks wait: no placement will ever be made for them.
    bool stalled = !horizon_reached && !diverged && !round_.ready().empty();
    if (stalled && sc_.on_stall == Scenario::OnStall::fail) {
      for (const ReadyTask& t : round_.ready()) {
        fail_task(t.task, "out of memory: no GPU can ever hold its " +
                              format_quantity(t.spec->vram_per_gpu_bytes(sc_.max_offload), Dimension::bytes) +
                              " (VRAM held by output tensors waiting for their consumers)");
      }
      round_.ready().clear();
      stalled = false;
    }
    network_.settle_all(end_s);
    Summary summary = summarize(sc_, cluster_, topology_, trace_, network_.link_bytes(), end_s, horizon_reached,
                                seed_, events);
    std::vector<double> link_bytes = network_.link_bytes();
    summary.stalled = stalled;
    faults_.summarize(end_s, summary);
    summary.flows_rerouted = flows_.rerouted();
    recovery_.summarize(summary);
    if (autoscaler_) autoscaler_->summarize(end_s, summary);
    if (autoscaler_ || sc_.spot.any()) {
      // With an autoscaler only nodes on are billed (provisioning included); spot nodes at their price.
      summary.cost_usd = 0;
      for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
        summary.cost_usd += billing_.cost_usd(n, autoscaler_ ? autoscaler_->billed_s(n) : end_s);
      }
    }
    summary.diverged = diverged;
    // Slowdown: latency over the workflow's critical path (its entry tasks' largest upward rank).
    std::vector<double> slowdown_sum(sc_.tenants.size(), 0.0);
    for (const InstanceRecord& inst : trace_.instances) {
      if (inst.end_s == kNever || inst.failed) continue;
      const double ideal = predicted_.critical_path_s(inst.workflow) * workload_.known_scale(make_id<InstanceId>(&inst - trace_.instances.data()));
      if (ideal > 0) slowdown_sum[index(inst.tenant)] += (inst.end_s - inst.arrival_s) / ideal;
    }
    for (std::size_t t = 0; t < sc_.tenants.size(); ++t) {
      const auto done = summary.tenants[t].workflows.completed;
      summary.tenants[t].mean_slowdown = done > 0 ? slowdown_sum[t] / static_cast<double>(done) : 0;
    }
    double vram_used_s = 0, vram_capacity_s = 0;
    for (std::uint32_t g = 0; g < cluster_.gpu_count(); ++g) {
      vram_used_s += memory_.used_seconds(make_id<GpuId>(g), end_s);
      vram_capacity_s += memory_.capacity(make_id<GpuId>(g)) * end_s;
    }
    summary.vram_utilization = vram_capacity_s > 0 ? vram_used_s / vram_capacity_s : 0;
    summary.evictions = memory_.evictions();
    summary.spilled_bytes = memory_.spilled_bytes();
    for (std::uint32_t g = 0; g < cluster_.gpu_count(); ++g) {
      const GpuId gpu = make_id<GpuId>(g);
      summary.vram_peak_utilization = std::max(summary.vram_peak_utilization, memory_.peak_used(gpu) / memory_.capacity(gpu));
    }
    std::vector<LinkSample> samples = network_.samples();
    std::vector<VramSample> vram = memory_.samples();
    return RunResult{std::move(cluster_), std::move(topology_), std::move(trace_), std::move(summary),
                     std::move(link_bytes), std::move(samples), std::move(vram), billing_.take_samples(), event_digest_};
  }

 private:
  // Per-task and per-instance state, sized once the workload has drawn every instance.
  void size_task_state() {
    const std::size_t total_tasks = trace_.tasks.size();
    occupancy_.size_instances(trace_.instances.size());
    pending_flows_.assign(total_tasks, 0);
    batching_.size_tasks(total_tasks);
    if (elastic_) elastic_->size_tasks(total_tasks);
    if (restartable_ || shared_.any()) stamp_.assign(total_tasks, 0);
    recovery_.size_tasks(total_tasks, restartable_);
    stage_.assign(total_tasks, Stage::inputs);
    collectives_.size_tasks(total_tasks);
    parts_left_.assign(total_tasks, 0);
  }

  const TaskSpec& spec(const TaskRecord& r) const { return sc_.workflows[r.workflow].tasks[r.task]; }
  TaskId task_id(std::uint32_t instance, std::uint32_t local) const { return workload_.task_id(instance, local); }
  double known_scale(TaskId id) const { return workload_.known_scale(trace_.tasks[index(id)].instance); }

  void make_ready(TaskId id) {
    TaskRecord& r = trace_.tasks[index(id)];
    r.ready_s = queue_.now();
    const TaskSpec& s = spec(r);
    const InstanceRecord& inst = trace_.instances[index(r.instance)];
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
                          predicted_.model(r.workflow, r.task), s.weights_bytes / s.gpus, s.working_set_bytes,
                          r.ready_s, inst.arrival_s, sc_.tenants[index(r.tenant)].priority,
                          sc_.tenants[index(r.tenant)].work_class == WorkClass::interactive, predicted_.rank_s(r.workflow, r.task) * known_scale(id),
                          predicted_.job_s(r.workflow) * known_scale(id), known_scale(id), input_gpu,
                          input_bytes};
    // A batchable task may wait out of the policy's sight until its batch is full.
    if (batching_.hold(batching_.key(r), ready, round_.ready())) return;
    round_.ready().push_back(ready);
    dirty_ = true;
  }

  // What the elastic component asks of the run.
  bool computing_alone(TaskId id) const override {
    return pending_flows_[index(id)] == 0 && !collectives_.running(id) && !shared_.computing(index(id));
  }
  void resize(TaskId id, const std::vector<GpuId>& gang, const std::string& why) override { resize_elastic(id, gang, why); }
  std::string label(TaskId id) const override { return round_.label(id); }

  ClusterView view() const override {
    return occupancy_.view(memory_, compute_, workload_.job_sizes(), queue_.now());
  }

  // A scheduling round (run/policy_round checks the policy's decisions and calls back start, fail,
  // preempt and fill_batch).
  void on_schedule() {
    schedule_pending_ = false;
    dirty_ = false;
    // A time-sliced GPU may take more tasks than one per round: another round, at once.
    if (round_.play(*this, listeners_) && shared_.any()) dirty_ = true;
  }
  void start(TaskId id, std::span<const GpuId> gpus) override { start_task(id, gpus); }
  void fail(TaskId id, const std::string& reason) override { fail_task(id, reason); }
  void preempt(TaskId id, const std::string& reason) override { stop_task(id, "preempted: " + reason, /*preempted=*/true); }
  void fill_batch(TaskId leader) override { form_batch(leader); }

  void start_task(TaskId id, std::span<const GpuId> gpus) {
    TaskRecord& r = trace_.tasks[index(id)];
    const TaskSpec& s = spec(r);
    const std::uint32_t model = predicted_.model(r.workflow, r.task);
    const double weights = s.weights_bytes / s.gpus;
    r.status = TaskStatus::running;
    r.start_s = queue_.now();
    for (GpuId g : gpus) {
      occupancy_.set_free_at(index(g), queue_.now() + predicted_.mean_s(r.workflow, r.task) * known_scale(id));
      occupancy_.add_task(index(g), index(id));
    }
    recovery_.started(id, queue_.now());
    occupancy_.add_tenant_gpus(r.tenant, static_cast<std::int64_t>(gpus.size()));
    r.gpu_begin = static_cast<std::uint32_t>(trace_.gpus.size());
    r.gpu_count = static_cast<std::uint32_t>(gpus.size());
    trace_.gpus.insert(trace_.gpus.end(), gpus.begin(), gpus.end());
    offloaded_.resize(trace_.gpus.size());
    for (run::RunListener* l : listeners_) l->task_started(id);

    // Weights not resident are loaded (load_weights).
    for (std::uint32_t member = 0; member < gpus.size(); ++member) {
      const GpuId g = gpus[member];
      // What does not fit of the working set goes to host memory: out and back over the host link.
      const double offload = memory_.offload_bytes(g, model, weights, s.working_set_bytes);
      offloaded_[r.gpu_begin + member] = offload;
      if (offload > 0) {
        r.offload_bytes += offload;
        const std::uint32_t host = topology_.host_vertex(cluster_.node_of(g));
        start_flow(id, topology_.gpu_vertex(g), host, offload, FlowTag{FlowKind::offload, member * 2, id}, route_key(index(g), index(id)));
        start_flow(id, host, topology_.gpu_vertex(g), offload, FlowTag{FlowKind::offload, member * 2 + 1, id}, route_key(index(g), index(id)));
      }
      if (memory_.admit(g, model, weights, s.working_set_bytes - offload, queue_.now())) load_weights(id, member, g, model, weights);
    }
    start_inputs(id, gpus[0]);
    stage_[index(id)] = Stage::inputs;
    if (pending_flows_[index(id)] == 0 && !s.batching) start_compute(id);
  }

  // Weights not resident on `g` (member `member` of the task's gang) are loaded (see WeightLoads).
  void load_weights(TaskId id, std::uint32_t member, GpuId g, std::uint32_t model, double weights) {
    const FlowTag tag{FlowKind::weights, member, id};
    const std::uint32_t source = weights_.begin(tag.packed(), id, g, model, weights, queue_.now());
    start_flow(id, source, topology_.gpu_vertex(g), weights, tag, route_key(index(g), model));
  }

  // Batching: the ready tasks of the leader's batching key that the policy left this round join it on
  // its GPU, in ready order, as many as max_size allows and the GPU's VRAM holds. Each reads its own
  // inputs; the batch computes once every member has them, and all members end together.
  void form_batch(TaskId leader) {
    const TaskRecord& lead = trace_.tasks[index(leader)];
    const TaskSpec& s = spec(lead);
    const GpuId g = trace_.gpus[lead.gpu_begin];
    const std::uint32_t key = batching_.key(lead);
    const std::uint32_t slot = batching_.open(leader);
    const std::uint32_t model = predicted_.model(lead.workflow, lead.task);
    const double weights = s.weights_bytes;
    for (std::size_t i = 0; i < round_.ready().size() && batching_.members(slot).size() < s.batching->max_size; ++i) {
      const TaskId f = round_.ready()[i].task;
      TaskRecord& r = trace_.tasks[index(f)];
      if (round_.decided(i) || batching_.key(r) != key) continue;
      if (!view().allowed(r.tenant, g) || (r.tenant != lead.tenant && (occupancy_.private_tenant(r.tenant) || occupancy_.private_tenant(lead.tenant)))) continue;
      const double working_set = spec(r).working_set_bytes;  // members of other workflows may need more or less
      if (!memory_.fits(g, model, weights, working_set)) break;
      round_.decide(i);
      r.status = TaskStatus::running;
      r.start_s = queue_.now();
      r.gpu_begin = static_cast<std::uint32_t>(trace_.gpus.size());
      r.gpu_count = 1;
      r.batched_with = index(leader) + 1;
      trace_.gpus.push_back(g);
      offloaded_.resize(trace_.gpus.size());
      offloaded_.back() = memory_.offload_bytes(g, model, weights, working_set);
      memory_.admit(g, model, weights, working_set - offloaded_.back(), queue_.now());
      occupancy_.add_tenant_gpus(r.tenant, 1);
      recovery_.started(f, queue_.now());
      batching_.join(slot, f);
      if (round_.recording()) round_.record(DecisionKind::placed, f, "batched with task \"" + s.name + "\"");
      start_inputs(f, g);
      stage_[index(f)] = Stage::inputs;
    }
    const std::vector<TaskId>& members = batching_.members(slot);
    if (members.size() > 1) trace_.tasks[index(leader)].batched_with = index(leader) + 1;
    // Members whose inputs are still on their way hold the batch back.
    const auto waiting = static_cast<std::uint32_t>(std::count_if(members.begin(), members.end(), [&](TaskId m) { return pending_flows_[index(m)] > 0; }));
    batching_.set_waiting(slot, waiting);
    if (waiting == 0) start_batch(slot);
  }

  // A member's inputs have arrived.
  void member_ready(TaskId id) {
    if (const std::uint32_t slot = batching_.batch_of(id); batching_.member_ready(slot)) start_batch(slot);
  }

  // The members' FLOP add up; of their bytes, the shared part is read once (the largest member's),
  // the rest by each member.
  void start_batch(std::uint32_t slot) {
    const std::vector<TaskId>& members = batching_.members(slot);
    const TaskRecord& lead = trace_.tasks[index(members.front())];
    const TaskSpec& s = spec(lead);
    double flop = 0, own_bytes = 0, largest_bytes = 0;
    for (TaskId m : members) {
      const TaskRecord& r = trace_.tasks[index(m)];
      flop += spec(r).flop * r.work_scale;
      own_bytes += spec(r).bytes * r.work_scale;
      largest_bytes = std::max(largest_bytes, spec(r).bytes * r.work_scale);
    }
    const double bytes = s.batching->shared_bytes * largest_bytes + (1 - s.batching->shared_bytes) * own_bytes;
    const GpuId g = trace_.gpus[lead.gpu_begin];
    // A model step runs once at the batch's size; other work adds up, sharing the bytes it shares.
    const ComputeEstimate estimate = s.architecture ? compute_.batched(s, cluster_.gpu_type(g), flop / s.flop)
                                                    : estimate_compute(cluster_.gpu_type(g), flop, bytes, s.dtype, s.launches);
    const double compute_s = estimate.total_s();
    for (TaskId m : members) {
      TaskRecord& r = trace_.tasks[index(m)];
      r.compute_start_s = queue_.now();
      record_parts(r, estimate);
      parts_left_[index(m)] = 1;
      if (recovery_.on()) recovery_.set_full_compute(m, compute_s);
    }
    // One compute for the batch: the leader's end ends its followers first.
    run_compute(members.front(), compute_s);
    occupancy_.set_free_at(index(g), queue_.now() + compute_s);
  }

  // Inputs move from each producer's first GPU to `to`, all at once. A tensor already there is read
  // in place and released at once.
  void start_inputs(TaskId id, GpuId to) {
    TaskRecord& r = trace_.tasks[index(id)];
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

  void start_flow(TaskId id, std::uint32_t from, std::uint32_t to, double bytes, FlowTag tag, std::uint64_t key) {
    if (!flows_.start(tag, from, to, bytes, key)) strand(id, from, to);
    ++pending_flows_[index(id)];
  }



  static void record_parts(TaskRecord& r, const ComputeEstimate& e) {
    r.compute_bound_s = e.compute_part_s();
    r.memory_bound_s = e.memory_part_s();
    r.fixed_s = e.launch_s;
  }

  void start_compute(TaskId id) {
    TaskRecord& r = trace_.tasks[index(id)];
    const TaskSpec& s = spec(r);
    r.compute_start_s = queue_.now();
    // A gang splits this instance's work evenly and finishes with its slowest member.
    const double share = r.work_scale / static_cast<double>(r.gpu_count);
    double compute_s = 0;
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
      const ComputeEstimate e = compute_.of(s, cluster_.gpu_type(trace_.gpus[r.gpu_begin + i]), share);
      if (i == 0 || e.total_s() > compute_s) record_parts(r, e);
      compute_s = std::max(compute_s, e.total_s());
    }
    // A run resuming from a checkpoint restores it, then does what is left.
    if (recovery_.on()) compute_s = recovery_.begin_compute(id, compute_s, s.elastic ? s.elastic->restart_s : 0, r.gpu_count);
    // Policies predict with the declared work (a trace job's duration), not a random draw.
    const double known = known_scale(id) / static_cast<double>(r.gpu_count);
    double predicted_s = 0;
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
      const GpuType& type = cluster_.gpu_type(trace_.gpus[r.gpu_begin + i]);
      predicted_s = std::max(predicted_s, compute_.of(s, type, known).total_s());
    }
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
      occupancy_.set_free_at(index(trace_.gpus[r.gpu_begin + i]), r.compute_start_s + predicted_s);
    }
    // A task with a collective ends when both its compute and its collective are done. The
    // collective starts when compute ends, or earlier by the overlapped fraction of the compute.
    const bool communicates = s.collective && r.gpu_count > 1;
    parts_left_[index(id)] = communicates ? 2 : 1;
    if (s.elastic) dirty_ = true;  // it can be resized from now on: a round looks at it
    run_compute(id, compute_s);
  }

  // The task computes for compute_s from now. On time-sliced GPUs it shares them with the tasks
  // computing there, so its end, and theirs, move whenever those tasks change.
  void run_compute(TaskId id, double compute_s) {
    const TaskRecord& r = trace_.tasks[index(id)];
    const std::span<const GpuId> gpus(trace_.gpus.data() + r.gpu_begin, r.gpu_count);
    if (shared_.any() && std::any_of(gpus.begin(), gpus.end(), [&](GpuId g) { return shared_.shared(g); })) {
      shared_.start(index(id), gpus, compute_s, queue_.now(), changed_);
      repace(changed_);
      return;
    }
    queue_.push(queue_.now() + compute_s, task_event(kComputeDone, id), index(id));
    if (const double overlap = overlap_of(id); overlap > 0) {
      queue_.push(queue_.now() + (1 - overlap) * compute_s, task_event(kCommStart, id), index(id));
    }
  }

  // The share of the task's compute its collective overlaps (0: it follows the compute).
  double overlap_of(TaskId id) const {
    const TaskSpec& s = spec(trace_.tasks[index(id)]);
    return parts_left_[index(id)] == 2 && trace_.tasks[index(id)].comm_start_s == kNever ? s.collective->overlap : 0;
  }

  // These tasks' paces changed: their pending compute ends (and collective starts) are stale.
  void repace(const std::vector<std::uint32_t>& tasks) {
    for (std::uint32_t t : tasks) {
      const TaskId id = make_id<TaskId>(t);
      ++stamp_[t];
      queue_.push(shared_.reaches_s(t, 0), task_event(kComputeDone, id), t);
      if (const double overlap = overlap_of(id); overlap > 0) {
        queue_.push(shared_.reaches_s(t, overlap * shared_.work_s(t)), task_event(kCommStart, id), t);
      }
    }
  }

  void on_compute_done(TaskId id) {
    if (trace_.tasks[index(id)].status != TaskStatus::running) return;  // failed meanwhile
    if (shared_.computing(index(id))) {
      shared_.stop(index(id), queue_.now(), changed_);
      repace(changed_);
    }
    if (const std::uint32_t slot = batching_.batch_of(id); slot != run::Batching::kNone) {
      batching_.dissolve(id);
      for (std::size_t i = 1; i < batching_.members(slot).size(); ++i) end_task(batching_.members(slot)[i]);
    }
    const TaskSpec& s = spec(trace_.tasks[index(id)]);
    if (parts_left_[index(id)] == 2 && s.collective->overlap == 0) {
      start_collective(id);
      if (trace_.tasks[index(id)].status != TaskStatus::running) return;  // the collective could not run
    }
    finish_part(id);
  }

  void finish_part(TaskId id) {
    if (--parts_left_[index(id)] == 0) end_task(id);
  }

  void start_collective(TaskId id) {
    TaskRecord& r = trace_.tasks[index(id)];
    const TaskSpec& s = spec(r);
    r.comm_start_s = queue_.now();
    const std::span<const GpuId> gang(trace_.gpus.data() + r.gpu_begin, r.gpu_count);
    if (const auto blocked = collectives_.begin(id, *s.collective, gang)) {
      if (blocked->cut) {
        stop_task(id, blocked->reason);
      } else {
        abort_running(id, blocked->reason);
      }
      return;
    }
    stage_[index(id)] = Stage::collective;
    start_collective_step(id);
  }

  // Starts the task's current collective step, or ends the task after the last one.
  void start_collective_step(TaskId id) {
    const std::vector<CollectiveFlow>* step = collectives_.next_step(id);
    if (step == nullptr) {
      finish_part(id);
      return;
    }
    for (const CollectiveFlow& f : *step) {
      const FlowTag tag{FlowKind::collective, 0, id};
      if (!flows_.start(tag, f.from, f.to, f.bytes, (std::uint64_t{f.from} << 32) | f.to, f.latency_s, f.cap_Bps)) strand(id, f.from, f.to);
      ++pending_flows_[index(id)];
    }
    flows_.changed();
  }

  // The flows delivered now: a read input releases its tensor, loaded weights are resident, and a task
  // whose last flow of a stage arrived goes on.
  void on_network() {
    for (const FlowDelivery& d : flows_.delivered()) {
      const FlowTag tag = FlowTag::of(d.tag);
      const TaskId id = tag.task;
      const TaskRecord& r = trace_.tasks[index(id)];
      if (tag.kind == FlowKind::input) {
        tensors_.release(index(r.instance), tag.part, queue_.now());
      } else if (tag.kind == FlowKind::weights) {
        weights_.delivered(d.tag, predicted_.model(r.workflow, r.task), queue_.now());
      }
      if (--pending_flows_[index(id)] != 0) continue;
      if (stage_[index(id)] == Stage::inputs && batching_.batch_of(id) != run::Batching::kNone) {
        member_ready(id);
      } else if (stage_[index(id)] == Stage::inputs) {
        start_compute(id);
      } else {
        start_collective_step(id);
      }
    }
  }

  // A task's events carry its stamp (run/events.hpp) where stamps are kept.
  std::uint32_t task_event(EventKind kind, TaskId id) const { return stamp_.empty() ? kind : stamped(kind, stamp_[index(id)]); }
  bool current(std::uint32_t stamp, std::uint32_t task) const { return stamp_.empty() || stamp == (stamp_[task] & run::kStampMask); }

  // A failure stops every task on its GPUs; nothing runs there until it is repaired, and what their
  // VRAM held is gone (host memory too, when a whole node fails).
  void on_fault(std::uint32_t subject) {
    const run::Fault f = faults_.fail(subject);
    if (f.link) {
      fail_link(*f.link);
    } else {
      if (f.node) weights_.host_lost(cluster_.node_of(make_id<GpuId>(f.first_gpu)));
      for (std::uint32_t g = f.first_gpu; g < f.first_gpu + f.gpus; ++g) {
        if (occupancy_.down(g)) continue;
        faults_.gpu_down(g, f.preemption);
        while (!occupancy_.tasks_on(g).empty()) stop_task(make_id<TaskId>(occupancy_.tasks_on(g).front()), f.event);
        occupancy_.set_down(g, true);
        occupancy_.set_free_at(g, queue_.now() + f.down_s);
        lose_tensors(make_id<GpuId>(g), f.event);
        memory_.wipe(make_id<GpuId>(g), queue_.now());
      }
    }
    faults_.schedule_repair(subject, f.down_s);
  }

  void on_repair(std::uint32_t subject) {
    const run::Fault f = faults_.repair(subject);
    if (f.link) {
      for (std::uint32_t l : {*f.link, *topology_.reverse_link(*f.link)}) {
        topology_.set_link_down(l, false);
        network_.set_link_down(l, false);
      }
    }
    for (std::uint32_t g = f.first_gpu; g < f.first_gpu + f.gpus; ++g) {
      if (!occupancy_.down(g)) continue;
      faults_.gpu_up(g);
      occupancy_.set_free_at(g, queue_.now());
      occupancy_.set_down(g, false);
    }
    faults_.schedule_next(subject);
  }

  // Link failures. A cable fails both ways: routes leave it out until it is repaired, its sending
  // flows are rerouted (a transport reconnect: the bytes left go on over the new route, whose latency
  // is paid once more on delivery), and a task with a flow that no route is left for is stopped as a
  // failure stops it. Flows delivering (all bytes sent) finish as they were.
  void fail_link(std::uint32_t link) {
    if (topology_.link_down(link)) return;
    faults_.link_down();
    const std::string event = "link " + topology_.link_name(link) + " failed";
    for (std::uint32_t l : {link, *topology_.reverse_link(link)}) topology_.set_link_down(l, true);
    for (std::uint32_t l : {link, *topology_.reverse_link(link)}) {
      reroute_flows_on(l, event);
      network_.set_link_down(l, true);
    }
    flows_.changed();
  }

  // Moves the flows sending over a failed link to routes around it; a flow with none left strands its task.
  void reroute_flows_on(std::uint32_t link, const std::string& event) {
    for (const run::Flows::Moved& m : flows_.reroute_off(link)) {
      if (!m.stranded) continue;
      stranded_.push_back({m.tag.task, recovery_.run(m.tag.task),
                           event + ": no route left from " + topology_.vertex_name(m.from) + " to " + topology_.vertex_name(m.to)});
    }
  }

  // A flow that no route can carry: its task is stopped after the current event, when nothing of it is half done.
  void strand(TaskId id, std::uint32_t from, std::uint32_t to) {
    stranded_.push_back({id, recovery_.run(id), "link failures left no route from " + topology_.vertex_name(from) + " to " +
                                                 topology_.vertex_name(to)});
  }

  void stop_stranded() {
    std::vector<Stranded> stranded;
    stranded.swap(stranded_);
    for (const Stranded& s : stranded) {
      if (trace_.tasks[index(s.task)].status == TaskStatus::running && recovery_.run(s.task) == s.run) stop_task(s.task, s.reason);
    }
  }

  // Output tensors held on a failed GPU are gone: consumers that have not read them cannot run.
  // (No lineage: the producer is not run again.)
  void lose_tensors(GpuId g, const std::string& event) {
    tensors_.lose(g, [&](TaskId consumer, TaskId producer) {
      std::erase_if(round_.ready(), [&](const ReadyTask& r) { return r.task == consumer; });
      batching_.forget(consumer);
      fail_task(consumer, "its input from task \"" + spec(trace_.tasks[index(producer)]).name + "\" was lost when " + event);
    });
  }

  // A failure stopped a running task: its transfers are dropped, its GPUs freed, and it runs again
  // after the backoff, from its last checkpoint, while it has attempts left.
  // A failure stopped a running task, or the policy preempted it. A preempted task is ready again at
  // once and its run does not count against the retry attempts.
  void stop_task(TaskId id, const std::string& what, bool preempted = false) {
    // A batch stops whole: its followers first, so the leader frees the GPU last.
    if (const std::uint32_t slot = batching_.batch_of(id); slot != run::Batching::kNone) {
      batching_.dissolve(id);
      for (std::size_t i = batching_.members(slot).size(); i-- > 0;) stop_task(batching_.members(slot)[i], what, preempted);
      return;
    }
    TaskRecord& r = trace_.tasks[index(id)];
    const double now = queue_.now();
    if (!preempted) round_.record(DecisionKind::stopped, id, what);
    dropped_.clear();
    network_.cancel_if([&](std::uint64_t tag) { return FlowTag::of(tag).task == id; }, now, dropped_);
    flows_.changed();
    std::vector<GpuId> unloaded;
    for (std::uint64_t tag : dropped_) {
      if (FlowTag::of(tag).kind == FlowKind::weights) unloaded.push_back(weights_.cancelled(tag, now));
    }
    collectives_.drop(id);
    double saved_s = 0;
    if (r.compute_start_s != kNever && recovery_.checkpoints()) {
      saved_s = recovery_.checkpoint(id, shared_.computing(index(id)) ? shared_.done_s(index(id), now) : now - r.compute_start_s);
    }
    const double lost_gpu_s = std::max(0.0, now - gang_start_s(r) - saved_s) * r.gpu_count;
    release_gpus(r);
    for (GpuId g : unloaded) memory_.drop_unloaded(g, predicted_.model(r.workflow, r.task), now);
    ++stamp_[index(id)];
    pending_flows_[index(id)] = 0;
    parts_left_[index(id)] = 0;
    r.status = TaskStatus::queued;
    r.start_s = r.compute_start_s = r.comm_start_s = r.resized_s = kNever;
    r.gpu_count = 0;
    r.input_bytes = 0;
    r.offload_bytes = 0;
    r.batched_with = 0;
    if (const std::optional<double> again_s = recovery_.stopped(id, now, preempted, lost_gpu_s)) {
      queue_.push(*again_s, task_event(kRetry, id), index(id));
    } else {
      fail_task(id, what + " " + recovery_.attempts(id));
    }
  }

  void on_retry(TaskId id) {
    if (trace_.tasks[index(id)].status == TaskStatus::queued) make_ready(id);
  }

  // Elastic tasks: run/elastic decides when and onto which GPUs; a resize keeps the work done, moves
  // the task to its new gang and pays the restart before computing what is left.



  // Moves a computing elastic task onto `gang` (GPUs it keeps, in their order, then new ones). The
  // work done is kept; it computes what is left at the new degree after its restart (and after the
  // weights reach new GPUs). Not a stop: no attempt is used and nothing counts as lost.
  void resize_elastic(TaskId id, const std::vector<GpuId>& gang, const std::string& why) {
    TaskRecord& r = trace_.tasks[index(id)];
    const TaskSpec& s = spec(r);
    const double now = queue_.now();
    recovery_.resized(id, now - r.compute_start_s);  // a new run, whose end, as a preemption's, uses no retry attempt
    trace_.left_gangs.push_back({id, gang_start_s(r), now, r.gpu_begin, r.gpu_count});
    occupancy_.attain(r.instance, (now - gang_start_s(r)) * r.gpu_count);
    ++stamp_[index(id)];  // the old run's compute and collective events are stale
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
    const double weights = s.weights_bytes / s.gpus;
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) {
      if (old_member(gang[i]) < old_count) continue;
      claim_gpu(id, gang[i]);
      if (memory_.admit(gang[i], model, weights, s.working_set_bytes, now)) load_weights(id, i, gang[i], model, weights);
    }
    occupancy_.add_tenant_gpus(r.tenant, static_cast<std::int64_t>(r.gpu_count) - old_count);
    r.resized_s = now;
    r.compute_start_s = r.comm_start_s = kNever;
    parts_left_[index(id)] = 0;
    round_.record(DecisionKind::resized, id, why);
    dirty_ = true;
    stage_[index(id)] = Stage::inputs;
    if (pending_flows_[index(id)] == 0) start_compute(id);
  }

  // One GPU of the task's gang is free again: at the task's end or stop (release_gpus), or when an
  // elastic task leaves it at a resize.
  void give_back_gpu(const TaskRecord& r, GpuId g, double offloaded_bytes) {
    occupancy_.remove_task(index(g), static_cast<std::uint32_t>(&r - trace_.tasks.data()));
    occupancy_.set_free_at(index(g), queue_.now());
    memory_.release(g, predicted_.model(r.workflow, r.task), spec(r).working_set_bytes - offloaded_bytes, queue_.now());
    released(index(g));
  }

  // A free GPU an elastic task takes at a resize, as start_task takes each GPU of a gang.
  void claim_gpu(TaskId id, GpuId g) {
    FLEETSIM_CHECK(occupancy_.tasks_on(index(g)).empty(), "an elastic task grows only onto idle GPUs");
    occupancy_.add_task(index(g), index(id));
  }

  // Nodes are billed from the start, but those an autoscaler starts off.
  void start_billing() {
    for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
      if (!autoscaler_ || n < static_cast<std::uint32_t>(sc_.autoscale.initial_nodes)) billing_.start(n);
    }
    billing_.open_timeline();
    if (autoscaler_) autoscaler_->start();
  }

  // Something left the GPU (a task, or a tensor it held): the features listening are told.
  void released(std::uint32_t g) {
    for (run::RunListener* l : listeners_) l->gpu_released(g);
  }

  void release_gpus(const TaskRecord& r) {
    occupancy_.add_tenant_gpus(r.tenant, -static_cast<std::int64_t>(r.gpu_count));
    occupancy_.attain(r.instance, (queue_.now() - gang_start_s(r)) * r.gpu_count);
    // A batch's follower gives back its VRAM; the GPU is the leader's to free.
    const auto self = static_cast<std::uint32_t>(&r - trace_.tasks.data());
    if (r.batched_with != 0 && r.batched_with != self + 1) {
      const GpuId g = trace_.gpus[r.gpu_begin];
      memory_.release(g, predicted_.model(r.workflow, r.task), spec(r).working_set_bytes - offloaded_[r.gpu_begin], queue_.now());
      return;
    }
    if (shared_.computing(self)) {
      shared_.stop(self, queue_.now(), changed_);
      repace(changed_);
    }
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) give_back_gpu(r, trace_.gpus[r.gpu_begin + i], offloaded_[r.gpu_begin + i]);
    dirty_ = true;
  }

  void end_task(TaskId id) {
    TaskRecord& r = trace_.tasks[index(id)];
    r.status = TaskStatus::completed;
    r.end_s = queue_.now();
    release_gpus(r);
    for (TaskId consumer : tensors_.produced(id, queue_.now())) make_ready(consumer);
    workload_.task_ended(index(r.instance));
  }

  // A running task that cannot go on: its GPUs are freed and it fails, with everything downstream.
  void abort_running(TaskId id, const std::string& reason) {
    TaskRecord& r = trace_.tasks[index(id)];
    release_gpus(r);
    r.status = TaskStatus::queued;  // so fail_task takes it
    fail_task(id, reason);
  }

  // Fails a task that has not started, and every task downstream of it.
  void fail_task(TaskId id, const std::string& reason) {
    TaskRecord& r = trace_.tasks[index(id)];
    if (r.status != TaskStatus::queued) return;
    r.status = TaskStatus::failed;
    r.end_s = queue_.now();
    r.reason = trace_.add_reason(reason);
    const std::uint32_t instance = index(r.instance);
    trace_.instances[instance].failed = true;
    tensors_.release_inputs(id, queue_.now());
    workload_.task_ended(instance);
    const Workflow& wf = sc_.workflows[r.workflow];
    const std::string downstream = "input from task \"" + wf.tasks[r.task].name + "\" failed";
    for (std::uint32_t e : wf.outputs(r.task)) fail_task(task_id(instance, wf.edges[e].to), downstream);
  }

  const Scenario& sc_;
  std::uint64_t seed_;
  std::uint64_t event_digest_ = 0;
  std::uint64_t max_in_flight_;
  bool restartable_;  // runs may be stopped (failures, preemption, resizes): per-task run numbers and checkpoints are kept
  Cluster cluster_;
  Topology topology_;
  Network network_;
  run::Flows flows_;
  run::Collectives collectives_;
  GpuMemory memory_;
  run::WeightLoads weights_;
  ComputeModel compute_;  // task compute times, model steps timed once per GPU type
  std::vector<std::uint32_t> pending_flows_;  // per task: flows not yet delivered
  std::vector<Stage> stage_;                  // per task
  std::vector<std::uint8_t> parts_left_;      // per running task: compute and collective not yet done
  EventQueue queue_;
  Trace trace_;
  run::Occupancy occupancy_;
  run::Billing billing_;
  run::Predictions predicted_;
  run::Workload workload_;
  run::Tensors tensors_;
  run::Faults faults_;
  run::Recovery recovery_;  // runs stopped by failures, preemption or resizes; checkpoints, retries
  run::Batching batching_;
  run::PolicyRound round_;
  std::optional<run::Autoscaler> autoscaler_;
  std::optional<run::Elastic> elastic_;
  std::vector<run::RunListener*> listeners_;  // the optional features attached

  std::function<void(std::size_t, std::size_t)> progress_cb_;
  SharedCompute shared_;                       // the pace of tasks on time-sliced GPUs
  std::vector<std::uint32_t> changed_;         // scratch: tasks whose pace changed
  std::vector<std::uint32_t> stamp_;           // per task: its events' stamp (see task_event)
  std::vector<std::uint64_t> dropped_;         // scratch: tags of cancelled flows
  struct Stranded {
    TaskId task;
    std::uint32_t run;   // the run it was stranded in
    std::string reason;
  };
  std::vector<Stranded> stranded_;             // tasks with a flow no route can carry, stopped after the event
  std::vector<double> offloaded_;  // per entry of trace_.gpus: working-set bytes its task keeps in host memory
  bool dirty_ = false;  // a round is wanted
  bool schedule_pending_ = false;
};

}  // namespace

RunResult simulate(const Scenario& scenario, const RunOptions& options) {
  Run run(scenario, options);
  RunResult result = run.execute();
  check_invariants(scenario, result);
  return result;
}

}  // namespace fleetsim
