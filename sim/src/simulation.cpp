#include "fleetsim/simulation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "fleetsim/engine.hpp"
#include "fleetsim/invariants.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/units.hpp"
#include "run/autoscaler.hpp"
#include "run/batching.hpp"
#include "run/billing.hpp"
#include "run/elastic.hpp"
#include "run/events.hpp"
#include "run/faults.hpp"
#include "run/flows.hpp"
#include "run/occupancy.hpp"
#include "run/policy_round.hpp"
#include "run/predictions.hpp"
#include "run/serving.hpp"
#include "run/tasks.hpp"
#include "run/workload.hpp"

namespace fleetsim {
namespace {

using namespace run;  // event kinds

// A run that keeps every record holds some 260 bytes a task to its end (a task's and its instance's
// records and the run's tables): past this many, it is refused before any arrival is made.
constexpr std::uint64_t kMostKeptTasks = 20'000'000;

// Whether a run may fold ended instances' records into its summary and drop them as it goes: nothing
// asks for them (RunOptions::keep_records), and nothing reads several of them together at the end: GPU
// time shared among tasks (time-sliced GPUs, batches), gangs left by stopped or resized runs
// (`restartable`), training jobs' iterations.
bool drops_records(const Scenario& sc, const RunOptions& options, bool restartable) {
  if (options.keep_records || restartable) return false;
  const auto& groups = sc.cluster.groups;
  if (std::any_of(groups.begin(), groups.end(), [](const NodeGroup& g) { return g.time_sliced_tasks > 1; })) return false;
  return std::none_of(sc.workflows.begin(), sc.workflows.end(), [](const Workflow& wf) {
    return std::any_of(wf.tasks.begin(), wf.tasks.end(), [](const TaskSpec& t) { return t.batching || t.training; });
  });
}

std::vector<double> vram_capacities(const Cluster& cluster) {
  std::vector<double> c;
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) c.push_back(cluster.gpu_type(make_id<GpuId>(g)).vram_bytes);
  return c;
}

// One run: the event queue, the dispatch from each event kind to the component it is for, the steps
// after every event, the effects of failures across components, and the summary. See docs/architecture.md.
class Run {
 public:
  Run(const Scenario& scenario, const RunOptions& options)
      : sc_(scenario),
        seed_(options.seed.value_or(scenario.seed)),
        max_in_flight_(options.max_in_flight),
        progress_(options.progress),
        cluster_(scenario.cluster),
        topology_(cluster_, scenario.cluster.fabric),
        network_(topology_.capacities(), scenario.max_min_tolerance.value_or(Network::kExactTolerance)),
        flows_(topology_, network_, queue_),
        memory_(vram_capacities(cluster_), sc_.max_offload),
        occupancy_(scenario, cluster_, trace_, round_wanted_),
        billing_(scenario, cluster_, queue_, options.record_link_samples),
        predicted_(scenario, cluster_, compute_),
        workload_(sc_, seed_, predicted_.job_gpu_s(), queue_, trace_),
        faults_(scenario, cluster_, topology_, occupancy_, seed_, queue_),
        serving_(scenario, cluster_, queue_, flows_, topology_, seed_, kServingArrival, kServingIteration, kServingScale),
        batching_(scenario, cluster_, trace_, predicted_, compute_, occupancy_, memory_, queue_, round_wanted_),
        round_(scenario, PolicyRound::make_policy(scenario), cluster_, occupancy_, memory_, predicted_, trace_, queue_,
               options.record_link_samples),
        // Runs may be stopped: by failures and spot preemptions, by a preempting policy, by an elastic
        // resize (which restarts a run, keeping its progress as a checkpoint does).
        restartable_(scenario.faults.any() || scenario.spot.any() || round_.may_preempt() || Elastic::any(scenario)),
        tasks_(scenario, cluster_, topology_, memory_, compute_, flows_, occupancy_, predicted_, workload_, batching_, round_,
               queue_, trace_, listeners_, round_wanted_, restartable_),
        drop_records_(drops_records(scenario, options, restartable_)),
        fold_(scenario, cluster_),
        slowdown_sum_(scenario.tenants.size(), 0.0) {
    if (sc_.instance_placement == Scenario::InstancePlacement::one_gpu && round_.may_preempt()) {
      throw InputError({Problem{sc_.file.empty() ? "scenario " + sc_.name : sc_.file, "/instance_placement",
                                "\"one-gpu\" runs each instance to its end on its GPU (as stock ComfyUI runs a prompt), but policy \"" + sc_.policy.name +
                                    "\" preempts running tasks: expected \"spread\" or a policy that does not preempt"}});
    }
    network_.record_samples(options.record_link_samples);
    memory_.record_samples(options.record_link_samples);
    // Kept records are reserved once; a run that drops them holds few at once.
    if (!drop_records_) {
      if (workload_.most_tasks() > kMostKeptTasks) refuse_kept_records();
      trace_.instances.reserve(workload_.most_instances());
      trace_.tasks.reserve(workload_.most_tasks());
    }
    if (sc_.autoscale.on()) {
      // A node going off loses what its host memory held.
      autoscaler_.emplace(sc_, cluster_, queue_, occupancy_, memory_, billing_, [this] { return workload_.unfinished() > 0 || serving_.unfinished() > 0; },
                          [this] { return serving_.nodes_wanted(); }, round_,
                          [this](std::uint32_t n) { tasks_.host_memory_lost(make_id<NodeId>(n)); });
      listeners_.push_back(&*autoscaler_);
    }
    if (Elastic::any(sc_)) {
      elastic_.emplace(sc_, cluster_, trace_, occupancy_, memory_, tasks_.shared(), predicted_, queue_, tasks_);
      listeners_.push_back(&*elastic_);
    }
  }

  RunResult execute() {
    serving_.start(occupancy_, memory_);  // replicas take their GPUs before any task is placed
    workload_.start_open_loops();
    faults_.start();
    start_billing();
    workload_.start_closed_loops();
    bool horizon_reached = false, diverged = false;
    double last_s = 0;
    std::uint64_t events = 0;
    // Random failures never run out: once every workflow has ended, only they would be left.
    while (!queue_.empty() && !diverged && !((restartable_ || autoscaler_) && workload_.unfinished() == 0 && serving_.unfinished() == 0)) {
      if (queue_.top().time_s > sc_.horizon_s) {
        horizon_reached = true;
        break;
      }
      if (events == sc_.max_events) stop_runaway(events);
      const Event e = queue_.pop();
      event_digest_ = hash_combine(hash_combine(hash_combine(event_digest_, std::bit_cast<std::uint64_t>(e.time_s)), e.kind), e.subject);
      if ((++events & 0xFFFFu) == 0 && progress_) progress_(workload_.most_instances() - workload_.unfinished(), workload_.most_instances());
      if (dispatch(e)) last_s = e.time_s;
      tasks_.stop_stranded();
      serving_.lose_stranded_kv();
      if (drop_records_) drop_ended();
      diverged = max_in_flight_ > 0 && workload_.in_flight() > max_in_flight_;
      flows_.arm();
      if (round_wanted_ && !round_pending_) {
        queue_.push(queue_.now(), kSchedule, 0);
        round_pending_ = true;
      }
    }
    return finish(horizon_reached ? sc_.horizon_s : last_s, horizon_reached, diverged, events);
  }

 private:
  [[noreturn]] void stop_runaway(std::uint64_t events) const {
    throw InputError({Problem{sc_.file.empty() ? "scenario " + sc_.name : sc_.file, "/max_events",
                              "the run was stopped after " + std::to_string(events) + " events, at " +
                                  format_quantity(queue_.now(), Dimension::time) + " of simulated time with " +
                                  std::to_string(workload_.unfinished()) + " workflows unfinished: it may never end (faults or "
                                  "arrivals faster than any work?). If it is meant to be this long, raise \"max_events\" "
                                  "(--max-events)"}});
  }

  [[noreturn]] void refuse_kept_records() const {
    throw InputError({Problem{sc_.file.empty() ? "scenario " + sc_.name : sc_.file, "/workload",
                              "would make up to " + std::to_string(workload_.most_tasks()) + " tasks, over the " + std::to_string(kMostKeptTasks) +
                                  " whose records a run keeps to its end (some 260 bytes each, in memory). A run keeps them where outputs list "
                                  "tasks (simulate's --out, --report and --cluster; plan; compare) or its summary reads them together (batches, "
                                  "time-sliced GPUs, runs that may stop tasks, training jobs); otherwise it holds only the instances in flight. "
                                  "Else: fewer arrivals, a slower rate or an earlier horizon"}});
  }

  // Hands the event to its component. False for a stale event (see run/events.hpp), which does not
  // extend the run.
  bool dispatch(const Event& e) {
    const TaskId task = make_id<TaskId>(e.subject);
    switch (kind_of(e)) {
      case kArrival: workload_.arrive(e.subject, [this](std::uint32_t) { size_tables(); }, [this](TaskId id) { tasks_.make_ready(id); }); return true;
      case kComputeDone:
        if (!tasks_.current(stamp_of(e), e.subject)) return false;
        // A task failed mid-compute (a collective that cannot run) leaves its compute's end queued; its
        // record may be dropped by then. It changes nothing either way, but counts as an event of the run.
        if (e.subject >= trace_.tasks_dropped) tasks_.on_compute_done(task);
        return true;
      case kCommStart:
        if (!tasks_.current(stamp_of(e), e.subject) || e.subject < trace_.tasks_dropped || trace_.task(task).status != TaskStatus::running) return false;
        return tasks_.on_collective_start(task);
      case kRetry:
        if (!tasks_.current(stamp_of(e), e.subject)) return false;
        tasks_.on_retry(task);
        return true;
      case kNetwork:
        if (!flows_.wake(e.subject)) return false;
        tasks_.on_network();
        serving_.on_network(flows_.delivered());
        return true;
      case kFault: on_fault(e.subject); return true;
      case kRepair: on_repair(e.subject); return true;
      case kAutoscale: autoscaler_->on_decide(); return true;
      case kNodeUp: autoscaler_->on_node_up(e.subject); return true;
      case kBatchRelease: return batching_.release_due(e.subject, round_.ready());
      case kSchedule: on_schedule(); return true;
      case kPolicyWake:
        if (e.subject != wake_generation_) return false;
        round_wanted_ = true;
        return true;
      case kServingArrival: serving_.arrive(e.subject); return true;
      case kServingIteration: return serving_.iteration_done(e.subject, stamp_of(e));
      case kServingScale: serving_.scale(e.subject); return false;  // a decision alone does not extend the run
    }
    FLEETSIM_CHECK(false, "unknown event kind");
  }

  // An instance arrived: the tables a task or an instance grow to hold its records.
  void size_tables() {
    const RecordCounts n{.tasks = trace_.tasks_dropped + trace_.tasks.size(), .instances = trace_.instances_dropped + trace_.instances.size(),
                         .most_tasks = workload_.most_tasks(), .most_instances = workload_.most_instances()};
    occupancy_.size_instances(n);
    batching_.size_tasks(n);
    tasks_.size_tasks(n);
    if (elastic_) elastic_->size_tasks(n);
  }

  // A scheduling round (run/policy_round checks the policy's decisions; the tasks carry them out).
  void on_schedule() {
    round_pending_ = false;
    round_wanted_ = false;
    tasks_.start_on_instance_gpus();
    // A time-sliced GPU may take more tasks than one per round: another round, at once.
    const std::size_t listed = occupancy_.attained_changes();
    if (round_.play(tasks_, listeners_) && tasks_.shared().any()) round_wanted_ = true;
    occupancy_.drop_attained_changes(listed);
    // Only the latest round's wish stands: an earlier wake-up goes stale.
    ++wake_generation_;
    if (const double at_s = round_.wake_at_s(); std::isfinite(at_s) && at_s > queue_.now()) queue_.push(at_s, kPolicyWake, wake_generation_);
  }

  // A failure stops every task on its GPUs; nothing runs there until it is repaired, and what their
  // VRAM held is gone (host memory too, when a whole node fails).
  void on_fault(std::uint32_t subject) {
    const Fault f = faults_.fail(subject);
    if (f.link) {
      fail_link(*f.link);
    } else {
      if (f.node) tasks_.host_memory_lost(cluster_.node_of(make_id<GpuId>(f.first_gpu)));
      for (std::uint32_t g = f.first_gpu; g < f.first_gpu + f.gpus; ++g) {
        if (occupancy_.down(g)) continue;
        faults_.gpu_down(g, f.preemption);
        serving_.gpu_down(g);
        while (!occupancy_.tasks_on(g).empty()) tasks_.stop(make_id<TaskId>(occupancy_.tasks_on(g).front()), f.event);
        occupancy_.set_down(g, true);
        occupancy_.set_free_at(g, queue_.now() + f.down_s);
        tasks_.lose_tensors(make_id<GpuId>(g), f.event);
        memory_.wipe(make_id<GpuId>(g), queue_.now());
      }
    }
    faults_.schedule_repair(subject, f.down_s);
  }

  void on_repair(std::uint32_t subject) {
    const Fault f = faults_.repair(subject);
    if (f.link) {
      for (std::uint32_t l : {*f.link, *topology_.reverse_link(*f.link)}) {
        topology_.set_link_down(l, false);
        network_.set_link_down(l, false);
      }
      serving_.routes_changed();
    }
    for (std::uint32_t g = f.first_gpu; g < f.first_gpu + f.gpus; ++g) {
      if (!occupancy_.down(g)) continue;
      faults_.gpu_up(g);
      serving_.gpu_up(g);
      occupancy_.set_free_at(g, queue_.now());
      occupancy_.set_down(g, false);
      // A GPU held for an instance stays busy for the policies: its waiting tasks start in the next round.
      if (sc_.instance_placement == Scenario::InstancePlacement::one_gpu) round_wanted_ = true;
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
      for (const Flows::Moved& m : flows_.reroute_off(l)) {
        if (!m.stranded) continue;
        if (m.tag.kind == FlowKind::kv) {
          serving_.kv_stranded(index(m.tag.task));
          continue;
        }
        tasks_.strand(m.tag.task, event + ": no route left from " + topology_.vertex_name(m.from) + " to " + topology_.vertex_name(m.to));
      }
      network_.set_link_down(l, true);
    }
    flows_.changed();
  }

  // Nodes are billed from the start, but those an autoscaler starts off.
  void start_billing() {
    for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
      if (!autoscaler_ || autoscaler_->starts_on(n)) billing_.start(n);
    }
    billing_.open_timeline();
    if (autoscaler_) autoscaler_->start();
  }

  // The run ended at `end_s`: tasks that can never be placed fail (or the run is reported stalled),
  // and every component writes its part of the summary.
  RunResult finish(double end_s, bool horizon_reached, bool diverged, std::uint64_t events) {
    bool stalled = !horizon_reached && !diverged && !round_.ready().empty();
    if (stalled && sc_.on_stall == Scenario::OnStall::fail) {
      for (const ReadyTask& t : round_.ready()) {
        tasks_.fail(t.task, "out of memory: no GPU can ever hold its " +
                                format_quantity(t.spec->vram_per_gpu_bytes(sc_.max_offload), Dimension::bytes) +
                                " (VRAM held by output tensors waiting for their consumers)");
      }
      round_.ready().clear();
      stalled = false;
    }
    network_.settle_all(end_s);
    fold(trace_.instances.size(), end_s);
    Summary summary = fold_.finish(trace_, topology_, network_.link_bytes(), end_s, horizon_reached, seed_, events);
    std::vector<double> link_bytes = network_.link_bytes();
    summary.stalled = stalled;
    summary.diverged = diverged;
    faults_.summarize(end_s, summary);
    summary.flows_rerouted = flows_.rerouted();
    summary.relevellings = network_.solve_counts().relevellings;
    summary.flows_solved = network_.solve_counts().flows_solved;
    summary.component_solves = network_.solve_counts().component_solves;
    tasks_.summarize(summary);
    serving_.summarize(end_s, summary);
    if (autoscaler_) autoscaler_->summarize(end_s, summary);
    if (autoscaler_ || sc_.spot.any()) {
      // With an autoscaler only nodes on are billed (provisioning included); spot nodes at their price.
      summary.cost_usd = 0;
      for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
        summary.cost_usd += billing_.cost_usd(n, autoscaler_ ? autoscaler_->billed_s(n) : end_s);
      }
    }
    summarize_slowdown(summary);
    summarize_vram(end_s, summary);
    std::vector<LinkSample> samples = network_.samples();
    std::vector<VramSample> vram = memory_.samples();
    return RunResult{std::move(cluster_), std::move(topology_), std::move(trace_), std::move(summary),
                     std::move(link_bytes), std::move(samples), std::move(vram), billing_.take_samples(), event_digest_};
  }

  // The first `instances` records held, and their tasks', added to the summary (in id order).
  void fold(std::size_t instances, double now_s) {
    fold_.add(trace_, instances, now_s);
    // Slowdown: latency over the workflow's critical path (its entry tasks' largest upward rank).
    for (std::size_t i = 0; i < instances; ++i) {
      const InstanceRecord& inst = trace_.instances[i];
      if (inst.end_s == kNever || inst.failed) continue;
      const double ideal = predicted_.critical_path_s(inst.workflow) * workload_.known_scale(make_id<InstanceId>(trace_.instances_dropped + i));
      if (ideal > 0) slowdown_sum_[index(inst.tenant)] += (inst.end_s - inst.arrival_s) / ideal;
    }
  }

  // Once the oldest records held, at least half of them (so that each record moves a few times at most),
  // are of ended instances, they are folded into the summary and dropped.
  void drop_ended() {
    const std::vector<InstanceRecord>& held = trace_.instances;
    while (ended_held_ < held.size() && held[ended_held_].end_s != kNever) ++ended_held_;
    if (ended_held_ < 1024 || ended_held_ < held.size() / 2) return;
    fold(ended_held_, queue_.now());
    const std::size_t tasks = ended_held_ < held.size() ? index(workload_.task_id(trace_.instances_dropped + static_cast<std::uint32_t>(ended_held_), 0)) - trace_.tasks_dropped
                                                        : trace_.tasks.size();
    trace_.instances.erase(trace_.instances.begin(), trace_.instances.begin() + static_cast<std::ptrdiff_t>(ended_held_));
    trace_.tasks.erase(trace_.tasks.begin(), trace_.tasks.begin() + static_cast<std::ptrdiff_t>(tasks));
    trace_.instances_dropped += static_cast<std::uint32_t>(ended_held_);
    trace_.tasks_dropped += static_cast<std::uint32_t>(tasks);
    ended_held_ = 0;
  }

  void summarize_slowdown(Summary& summary) const {
    for (std::size_t t = 0; t < sc_.tenants.size(); ++t) {
      const auto done = summary.tenants[t].workflows.completed;
      summary.tenants[t].mean_slowdown = done > 0 ? slowdown_sum_[t] / static_cast<double>(done) : 0;
    }
  }

  void summarize_vram(double end_s, Summary& summary) const {
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
  }

  const Scenario& sc_;
  std::uint64_t seed_;
  std::uint64_t max_in_flight_;
  std::function<void(std::size_t, std::size_t)> progress_;
  std::uint64_t event_digest_ = 0;
  Cluster cluster_;
  Topology topology_;
  Network network_;
  EventQueue queue_;
  Trace trace_;
  bool round_wanted_ = false;   // something may let a waiting task start: a round is wanted
  bool round_pending_ = false;  // a kSchedule event is queued
  std::uint32_t wake_generation_ = 0;  // of the policy's latest wake-up (kPolicyWake)
  std::vector<RunListener*> listeners_;  // the optional features attached
  Flows flows_;
  GpuMemory memory_;
  ComputeModel compute_;  // task compute times, model steps timed once per GPU type
  Occupancy occupancy_;
  Billing billing_;
  Predictions predicted_;
  Workload workload_;
  Faults faults_;
  Serving serving_;
  Batching batching_;
  PolicyRound round_;
  bool restartable_;
  Tasks tasks_;
  std::optional<Autoscaler> autoscaler_;
  std::optional<Elastic> elastic_;
  bool drop_records_;           // ended instances' records are folded into the summary and dropped as the run goes
  SummaryFold fold_;            // the summary's sums over the records folded so far
  std::vector<double> slowdown_sum_;  // per tenant: completed instances' slowdowns folded so far
  std::size_t ended_held_ = 0;  // records held from the first whose instances have all ended
};

}  // namespace

RunResult simulate(const Scenario& scenario, const RunOptions& options) {
  Run run(scenario, options);
  RunResult result = run.execute();
  check_invariants(scenario, result);
  return result;
}

}  // namespace fleetsim
