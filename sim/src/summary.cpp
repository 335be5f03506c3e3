#include "fleetsim/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <span>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {

std::string format_slo_value(const std::string& metric, double value) {
  if (metric == "throughput") return format_quantity(value, Dimension::rate);
  if (metric == "attainment") {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * value);
    return buf;
  }
  return format_quantity(value, Dimension::time);
}

namespace {

// The p-th percentile of sorted values, interpolated between ranks.
double percentile_of_sorted(const std::vector<double>& values, double p) {
  if (values.empty()) return 0.0;
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

}  // namespace

std::string slo_scope(const SloResult& slo) {
  if (!slo.deployment.empty()) return slo.deployment + (slo.tenant.empty() ? "" : " " + slo.tenant) + " (serving)";
  if (!slo.tenant.empty()) return slo.tenant;
  return slo.work_class.empty() ? "all" : slo.work_class + " (class)";
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, p);
}

LatencyStats latency_stats(std::vector<double> values) {
  LatencyStats s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = percentile_of_sorted(values, 50);
  s.p95 = percentile_of_sorted(values, 95);
  s.p99 = percentile_of_sorted(values, 99);
  s.max = values.back();
  return s;
}

namespace {

void count(Counts& c, TaskStatus status) {
  ++c.submitted;
  switch (status) {
    case TaskStatus::queued: ++c.queued; break;
    case TaskStatus::running: ++c.running; break;
    case TaskStatus::completed: ++c.completed; break;
    case TaskStatus::failed: ++c.failed; break;
  }
}

TaskStatus instance_status(const InstanceRecord& inst, bool any_started) {
  if (inst.failed) return TaskStatus::failed;
  if (inst.end_s != kNever) return TaskStatus::completed;
  return any_started ? TaskStatus::running : TaskStatus::queued;
}

// GPU time of the first `tasks` records held. A GPU is busy while it holds a task; tasks holding it
// together (a batch, co-runners on a time-sliced GPU) share that time evenly. Fills each task's
// GPU-seconds and adds to each GPU's busy seconds.
void share_gpu_time(const Cluster& cluster, const Trace& trace, std::size_t tasks, double end_s, std::vector<double>& task_gpu_s,
                    std::vector<double>& busy_per_gpu) {
  task_gpu_s.assign(tasks, 0.0);
  const std::span<const TaskRecord> records(trace.tasks.data(), tasks);
  const auto& groups = cluster.spec().groups;
  const bool sliced = std::any_of(groups.begin(), groups.end(), [](const NodeGroup& g) { return g.time_sliced_tasks > 1; });
  if (!sliced) {
    // One task per GPU, or a batch whose members share its span: the closed form, in one pass (each
    // batch's size counted only where a task was batched: a table a task is a run's peak memory).
    const bool batched = std::any_of(records.begin(), records.end(), [](const TaskRecord& t) { return t.batched_with != 0; });
    std::vector<std::uint32_t> batch_size(batched ? tasks : 0, 0);
    for (const TaskRecord& t : records) {
      if (t.batched_with != 0) ++batch_size[t.batched_with - 1 - trace.tasks_dropped];
    }
    for (std::size_t k = 0; k < tasks; ++k) {
      const TaskRecord& t = trace.tasks[k];
      if (t.start_s == kNever) continue;
      const double held = ((t.end_s != kNever ? t.end_s : end_s) - gang_start_s(t)) / (t.batched_with != 0 ? batch_size[t.batched_with - 1 - trace.tasks_dropped] : 1);
      task_gpu_s[k] = held * t.gpu_count;
      for (std::uint32_t i = 0; i < t.gpu_count; ++i) busy_per_gpu[index(trace.gpus[t.gpu_begin + i])] += held;
    }
    // Gangs held before a resize or a stop.
    for (const LeftGang& left : trace.left_gangs) {
      task_gpu_s[index(left.task) - trace.tasks_dropped] += (left.end_s - left.start_s) * left.gpu_count;
      for (std::uint32_t i = 0; i < left.gpu_count; ++i) busy_per_gpu[index(trace.gpus[left.gpu_begin + i])] += left.end_s - left.start_s;
    }
    return;
  }
  // A sweep over each GPU's starts and ends.
  struct Change {
    double time_s;
    int delta;
    std::uint32_t task;
    bool operator<(const Change& o) const { return time_s < o.time_s || (time_s == o.time_s && delta < o.delta); }
  };
  std::vector<std::vector<Change>> changes(cluster.gpu_count());
  for (std::size_t k = 0; k < tasks; ++k) {
    const TaskRecord& t = trace.tasks[k];
    if (t.start_s == kNever) continue;
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      auto& c = changes[index(trace.gpus[t.gpu_begin + i])];
      c.push_back({gang_start_s(t), +1, static_cast<std::uint32_t>(k)});
      c.push_back({t.end_s != kNever ? t.end_s : end_s, -1, static_cast<std::uint32_t>(k)});
    }
  }
  for (const LeftGang& left : trace.left_gangs) {
    for (std::uint32_t i = 0; i < left.gpu_count; ++i) {
      auto& c = changes[index(trace.gpus[left.gpu_begin + i])];
      c.push_back({left.start_s, +1, index(left.task) - trace.tasks_dropped});
      c.push_back({left.end_s, -1, index(left.task) - trace.tasks_dropped});
    }
  }
  std::vector<std::uint32_t> holding;
  for (std::size_t g = 0; g < changes.size(); ++g) {
    std::sort(changes[g].begin(), changes[g].end());
    holding.clear();
    double since = 0;
    for (const Change& c : changes[g]) {
      if (!holding.empty()) {
        const double dt = c.time_s - since;
        busy_per_gpu[g] += dt;
        for (std::uint32_t k : holding) task_gpu_s[k] += dt / static_cast<double>(holding.size());
      }
      since = c.time_s;
      if (c.delta > 0) {
        holding.push_back(c.task);
      } else {
        std::erase(holding, c.task);
      }
    }
  }
}

// Per leaf switch, the bytes its uplinks carried (ECMP's choices among the spines), where the busiest
// carried over 1.5 times their mean: a hash that put the flows on few spines.
std::vector<UnevenUplinks> uneven_uplinks(const Topology& topology, const std::vector<double>& link_bytes) {
  std::map<std::uint32_t, std::vector<double>> up;  // leaf vertex -> its uplinks' bytes
  const auto& links = topology.links();
  for (std::size_t l = 0; l < links.size() && l < link_bytes.size(); ++l) {
    if (links[l].cls != LinkClass::fabric || topology.vertex_name(links[l].from).rfind("leaf", 0) != 0) continue;
    up[links[l].from].push_back(link_bytes[l]);
  }
  std::vector<UnevenUplinks> out;
  for (const auto& [leaf, bytes] : up) {
    if (bytes.size() < 2) continue;
    const double total = std::accumulate(bytes.begin(), bytes.end(), 0.0), mean = total / static_cast<double>(bytes.size());
    const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
    if (total <= 0 || *hi <= 1.5 * mean) continue;
    out.push_back({.leaf = topology.vertex_name(leaf), .uplinks = static_cast<int>(bytes.size()), .min_bytes = *lo, .max_bytes = *hi, .mean_bytes = mean});
  }
  std::stable_sort(out.begin(), out.end(), [](const UnevenUplinks& a, const UnevenUplinks& b) { return a.max_bytes / a.mean_bytes > b.max_bytes / b.mean_bytes; });
  return out;
}

// Each training job's iterations, from the records of its tasks (one an iteration).
std::vector<TrainingResult> training_results(const Scenario& scenario, const Cluster& cluster, const Trace& trace) {
  std::vector<TrainingResult> out;
  std::vector<std::int32_t> result_of(scenario.workflows.size(), -1);
  for (std::size_t w = 0; w < scenario.workflows.size(); ++w) {
    const Workflow& wf = scenario.workflows[w];
    if (wf.tasks.empty() || !wf.tasks.front().training) continue;
    result_of[w] = static_cast<std::int32_t>(out.size());
    out.emplace_back().iteration = wf.tasks.front().training;
    out.back().completed_at_dp.resize(out.back().iteration->elastic_dp.size());
  }
  if (out.empty()) return out;
  // Per instance, its iterations' records in order (an instance's tasks are its workflow's, in order).
  std::vector<std::vector<const TaskRecord*>> per_instance(trace.instances.size());
  for (const TaskRecord& t : trace.tasks) {
    if (result_of[t.workflow] < 0 || trace.instances[index(t.instance)].arrival_s == kNever) continue;
    auto& v = per_instance[index(t.instance)];
    if (v.size() <= t.task) v.resize(t.task + 1, nullptr);
    v[t.task] = &t;
  }
  std::vector<std::vector<double>> durations(out.size());
  std::vector<double> gpu_s(out.size(), 0.0);  // elastic jobs: the completed iterations' durations times their gangs
  std::vector<const GpuType*> first_gpu(out.size(), nullptr);
  for (const auto& records : per_instance) {
    double previous_end = kNever;
    for (const TaskRecord* t : records) {
      if (t == nullptr) continue;
      const auto k = static_cast<std::size_t>(result_of[t->workflow]);
      TrainingResult& r = out[k];
      const std::vector<int>& degrees = r.iteration->elastic_dp;
      ++r.iterations;
      if (first_gpu[k] == nullptr && t->gpu_count > 0) first_gpu[k] = &cluster.gpu_type(trace.gpus[t->gpu_begin]);
      r.restarts += t->restarts;
      if (t->status == TaskStatus::completed) {
        ++r.completed;
        if (scenario.workflows[t->workflow].tasks[t->task].checkpoint) ++r.checkpoints;
        durations[k].push_back(t->end_s - (previous_end != kNever ? previous_end : t->start_s));
        if (!degrees.empty()) {
          gpu_s[k] += durations[k].back() * t->gpu_count;
          const int dp = static_cast<int>(t->gpu_count) / (r.iteration->gpus / r.iteration->dp);
          const auto at = static_cast<std::size_t>(std::find(degrees.begin(), degrees.end(), dp) - degrees.begin());
          FLEETSIM_CHECK(at < degrees.size(), "an elastic training iteration ran at a DP degree it does not have");
          ++r.completed_at_dp[at];
        }
        previous_end = t->end_s;
      }
    }
  }
  for (const LeftGang& left : trace.left_gangs) {
    if (!left.rolled_back) continue;
    TrainingResult& r = out[static_cast<std::size_t>(result_of[trace.task(left.task).workflow])];
    ++r.rollbacks;
    r.iterations_rolled_back += left.iterations_lost;
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    TrainingResult& r = out[k];
    r.iteration_s = latency_stats(std::move(durations[k]));
    if (first_gpu[k] == nullptr) continue;
    const TrainingIteration::OnGpu& on = r.iteration->on_gpu(*first_gpu[k]);
    r.gpu = on.gpu;
    r.alone_s = on.alone_s;
    r.checkpoint_s = on.checkpoint_s;
    r.checkpoint_load_s = on.checkpoint_load_s;
    if (r.iteration_s.count == 0) continue;
    r.slowdown = r.iteration_s.mean / r.alone_s;
    r.tokens_per_s = r.iteration->tokens / r.iteration_s.mean;
    // An elastic job's MFU over the GPUs each iteration held.
    r.mfu = r.iteration->elastic_dp.empty() ? r.iteration->model_flop / (r.iteration_s.mean * r.iteration->gpus * on.peak_flops)
                                            : r.iteration->model_flop * static_cast<double>(r.iteration_s.count) / (gpu_s[k] * on.peak_flops);
  }
  return out;
}

}  // namespace

std::optional<double> measured_latency(const Scenario& scenario, const InstanceRecord& inst) {
  if (inst.arrival_s == kNever || instance_status(inst, true) != TaskStatus::completed || inst.arrival_s < scenario.warmup_s) return std::nullopt;
  return inst.end_s - inst.arrival_s;  // measured past the warm-up
}

SummaryFold::SummaryFold(const Scenario& scenario, const Cluster& cluster)
    : sc_(scenario),
      cluster_(cluster),
      busy_per_gpu_(cluster.gpu_count(), 0.0),
      latencies_(scenario.tenants.size()),
      waited_(scenario.tenants.size(), 0.0),
      placed_(scenario.tenants.size(), 0.0),
      slo_submitted_(scenario.slos.size(), 0),
      slo_within_(scenario.slos.size(), 0),
      recorded_s_(scenario.workflows.size(), 0.0),
      recorded_n_(scenario.workflows.size(), 0) {
  s_.tenants.resize(scenario.tenants.size());
}

void SummaryFold::add(const Trace& trace, std::size_t instances, double end_s) {
  const Scenario& scenario = sc_;
  Summary& s = s_;
  std::size_t tasks = 0;
  for (std::size_t i = 0; i < instances; ++i) tasks += scenario.workflows[trace.instances[i].workflow].tasks.size();
  if (instances < trace.instances.size()) {
    const auto& groups = cluster_.spec().groups;
    FLEETSIM_CHECK(trace.left_gangs.empty() && std::none_of(groups.begin(), groups.end(), [](const NodeGroup& g) { return g.time_sliced_tasks > 1; }) &&
                       std::none_of(trace.tasks.begin(), trace.tasks.begin() + static_cast<std::ptrdiff_t>(tasks), [](const TaskRecord& t) { return t.batched_with != 0; }),
                   "records added in parts whose GPU time is shared among tasks");
  }
  // Closed-loop workflows that never came (the horizon cut the loop) were never submitted.
  auto arrived = [&](const TaskRecord& t) { return trace.instance(index(t.instance)).arrival_s != kNever; };
  std::vector<std::uint8_t> started(instances, 0);
  std::vector<double> task_gpu_s;
  share_gpu_time(cluster_, trace, tasks, end_s, task_gpu_s, busy_per_gpu_);
  for (std::size_t k = 0; k < tasks; ++k) {
    const TaskRecord& t = trace.tasks[k];
    if (!arrived(t)) continue;
    count(s.tasks, t.status);
    if (t.start_s != kNever) started[index(t.instance) - trace.instances_dropped] = 1;
    if (t.status == TaskStatus::completed) s.makespan_s = std::max(s.makespan_s, t.end_s);
    s.gpu_busy_s += task_gpu_s[k];
    s.bytes_transferred += t.input_bytes;
    if (t.batched_with != 0 && t.status == TaskStatus::completed) {
      ++s.batched_tasks;
      if (t.batched_with == index(trace.id_of(t)) + 1) ++s.batches;
    }
    if (t.offload_bytes > 0) {
      ++s.offloaded_tasks;
      s.offload_bytes += t.offload_bytes;
    }
  }
  for (std::size_t i = 0; i < instances; ++i) {
    const InstanceRecord& inst = trace.instances[i];
    if (inst.arrival_s == kNever) continue;
    const TaskStatus status = instance_status(inst, started[i] != 0);
    count(s.workflows, status);
    count(s.tenants[index(inst.tenant)].workflows, status);
    if (const std::optional<double> latency = measured_latency(scenario, inst)) latencies_[index(inst.tenant)].push_back(*latency);
  }
  for (std::size_t k = 0; k < tasks; ++k) {
    const TaskRecord& t = trace.tasks[k];
    if (t.start_s == kNever) continue;
    waited_[index(t.tenant)] += t.start_s - t.ready_s;
    placed_[index(t.tenant)] += 1;
    s.tenants[index(t.tenant)].gpu_s += task_gpu_s[k];
  }
  for (std::size_t k = 0; k < scenario.slos.size(); ++k) {
    const Slo& slo = scenario.slos[k];
    if (slo.metric != SloMetric::attainment) continue;
    for (std::size_t i = 0; i < instances; ++i) {
      const InstanceRecord& inst = trace.instances[i];
      if (inst.arrival_s == kNever || inst.arrival_s < scenario.warmup_s || (slo.tenant && index(inst.tenant) != *slo.tenant)) continue;
      if (slo.work_class && scenario.tenants[index(inst.tenant)].work_class != *slo.work_class) continue;
      ++slo_submitted_[k];
      if (inst.end_s != kNever && !inst.failed && inst.end_s - inst.arrival_s <= slo.within_s) ++slo_within_[k];
    }
  }
  for (std::size_t i = 0; i < instances; ++i) {
    const InstanceRecord& inst = trace.instances[i];
    if (!scenario.workflows[inst.workflow].recorded || inst.arrival_s == kNever || inst.end_s == kNever || inst.failed) continue;
    recorded_s_[inst.workflow] += inst.end_s - inst.arrival_s;
    ++recorded_n_[inst.workflow];
  }
}

Summary SummaryFold::finish(const Trace& trace, const Topology& topology, const std::vector<double>& link_bytes, double end_s,
                            bool horizon_reached, std::uint64_t seed, std::uint64_t events) {
  const Scenario& scenario = sc_;
  const Cluster& cluster = cluster_;
  Summary s = std::move(s_);
  s.scenario = scenario.name;
  s.policy = scenario.policy.name;
  s.one_gpu_instances = scenario.instance_placement == Scenario::InstancePlacement::one_gpu;
  s.max_min_tolerance = scenario.max_min_tolerance;
  s.seed = seed;
  s.gpus = cluster.gpu_count();
  s.nodes = cluster.node_count();
  s.end_s = end_s;
  s.horizon_reached = horizon_reached;
  s.events = events;
  for (const WeightLoad& load : trace.weight_loads) {
    ++s.weight_loads;
    if (load.from_storage) ++s.storage_reads;
    s.weight_bytes_loaded += load.bytes;
    if (load.end_s != kNever) s.weight_load_s += load.end_s - load.start_s;
  }
  s.resizes = static_cast<std::uint64_t>(std::count_if(trace.left_gangs.begin(), trace.left_gangs.end(), [](const LeftGang& l) { return !l.stopped; }));
  for (std::size_t l = 0; l < link_bytes.size(); ++l) {
    switch (topology.links()[l].cls) {
      case LinkClass::gpu_link: s.gpu_link_bytes += link_bytes[l]; break;
      case LinkClass::host_link: s.host_link_bytes += link_bytes[l]; break;
      case LinkClass::nic: s.nic_bytes += link_bytes[l]; break;
      case LinkClass::fabric: s.fabric_bytes += link_bytes[l]; break;
      case LinkClass::storage: s.storage_bytes += link_bytes[l]; break;
      case LinkClass::host_memory: break;  // the bytes of the host links and storage they cross
    }
  }
  if (s.gpus > 0 && end_s > 0) s.gpu_utilization = s.gpu_busy_s / (s.gpus * end_s);
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    s.cost_usd += cluster.gpu_type(make_id<GpuId>(g)).price_usd_per_hour * end_s / 3600.0;
  }

  // Energy: each GPU at TDP while held by a task, at idle power otherwise.
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    const GpuType& type = cluster.gpu_type(make_id<GpuId>(g));
    s.energy_j += busy_per_gpu_[g] * type.tdp_w + std::max(0.0, end_s - busy_per_gpu_[g]) * type.idle_power_w;
  }

  // Latencies: every tenant's together (latency_stats sorts them, so the order they are put in does not matter).
  std::vector<std::vector<double>>& per_tenant = latencies_;
  std::vector<double> all;
  for (const auto& l : per_tenant) all.insert(all.end(), l.begin(), l.end());
  for (std::size_t i = 0; i < scenario.tenants.size(); ++i) s.tenants[i].name = scenario.tenants[i].name;
  s.latency_s = latency_stats(std::move(all));
  const std::vector<double>& waited = waited_;
  const std::vector<double>& placed = placed_;
  // Per class: the tenants of each class together (their latencies only where a page or an SLO asks
  // for a class: a run's latencies are a good part of its memory at the end).
  const bool classes = std::any_of(scenario.tenants.begin(), scenario.tenants.end(), [](const Tenant& t) { return t.work_class == WorkClass::interactive; });
  const bool class_slos = std::any_of(scenario.slos.begin(), scenario.slos.end(), [](const Slo& slo) { return slo.work_class.has_value(); });
  std::vector<std::vector<double>> per_class(2);
  for (std::size_t i = 0; (classes || class_slos) && i < s.tenants.size(); ++i) {
    const auto c = static_cast<std::size_t>(scenario.tenants[i].work_class);
    per_class[c].insert(per_class[c].end(), per_tenant[i].begin(), per_tenant[i].end());
  }
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < s.tenants.size(); ++i) {
    TenantSummary& ts = s.tenants[i];
    ts.latency_s = latency_stats(std::move(per_tenant[i]));
    ts.mean_wait_s = placed[i] > 0 ? waited[i] / placed[i] : 0;
    ts.throughput_per_s = end_s > 0 ? static_cast<double>(ts.workflows.completed) / end_s : 0;
    const double share = ts.gpu_s / scenario.tenants[i].quota;
    sum += share;
    sum_sq += share * share;
  }
  if (sum_sq > 0) s.fairness = sum * sum / (static_cast<double>(s.tenants.size()) * sum_sq);

  std::vector<TenantSummary> by_class(2);
  by_class[0].name = work_class_name(WorkClass::batch);
  by_class[1].name = work_class_name(WorkClass::interactive);
  std::vector<double> class_waited(2, 0.0), class_placed(2, 0.0);
  for (std::size_t i = 0; i < s.tenants.size(); ++i) {
    const auto c = static_cast<std::size_t>(scenario.tenants[i].work_class);
    Counts& w = by_class[c].workflows;
    const Counts& t = s.tenants[i].workflows;
    w.submitted += t.submitted;
    w.completed += t.completed;
    w.failed += t.failed;
    w.running += t.running;
    w.queued += t.queued;
    class_waited[c] += waited[i];
    class_placed[c] += placed[i];
    by_class[c].gpu_s += s.tenants[i].gpu_s;
  }
  for (std::size_t c = 0; c < 2; ++c) {
    by_class[c].latency_s = latency_stats(std::move(per_class[c]));
    by_class[c].mean_wait_s = class_placed[c] > 0 ? class_waited[c] / class_placed[c] : 0;
    by_class[c].throughput_per_s = end_s > 0 ? static_cast<double>(by_class[c].workflows.completed) / end_s : 0;
  }
  if (classes) s.classes = by_class;

  for (std::size_t k = 0; k < scenario.slos.size(); ++k) {
    const Slo& slo = scenario.slos[k];
    SloResult r;
    r.tenant = slo.tenant ? scenario.tenants[*slo.tenant].name : "";
    r.work_class = slo.work_class ? std::string(work_class_name(*slo.work_class)) : "";
    const TenantSummary* scope = slo.tenant ? &s.tenants[*slo.tenant] : slo.work_class ? &by_class[static_cast<std::size_t>(*slo.work_class)] : nullptr;
    r.metric = slo_metric_name(slo.metric);
    r.target = slo.target;
    r.at_least = slo.at_least();
    r.within_s = slo.within_s;
    const LatencyStats& stats = scope != nullptr ? scope->latency_s : s.latency_s;
    switch (slo.metric) {
      case SloMetric::latency_p50: r.actual = stats.p50; break;
      case SloMetric::latency_p95: r.actual = stats.p95; break;
      case SloMetric::latency_p99: r.actual = stats.p99; break;
      case SloMetric::throughput: r.actual = scope != nullptr ? scope->throughput_per_s : (end_s > 0 ? static_cast<double>(s.workflows.completed) / end_s : 0); break;
      case SloMetric::attainment: {
        const std::uint64_t submitted = slo_submitted_[k], within = slo_within_[k];
        r.actual = submitted > 0 ? static_cast<double>(within) / static_cast<double>(submitted) : 0;
        break;
      }
    }
    // No completed workflow is no evidence the SLO holds.
    r.met = stats.count > 0 && (r.at_least ? r.actual >= r.target : r.actual <= r.target);
    s.slos.push_back(r);
  }
  s.training = training_results(scenario, cluster, trace);
  for (std::size_t w = 0; w < scenario.workflows.size(); ++w) {
    const Workflow& wf = scenario.workflows[w];
    if (!wf.recorded) continue;
    RecordedCheck c{.workflow = wf.id.empty() ? wf.name : wf.id, .recorded_s = wf.recorded->makespan_s, .simulated_s = recorded_s_[w],
                    .instances = recorded_n_[w], .machines = wf.recorded->machines};
    if (c.instances > 0) c.simulated_s /= static_cast<double>(c.instances);
    s.recorded_runs.push_back(std::move(c));
  }
  s.uneven_uplinks = uneven_uplinks(topology, link_bytes);
  return s;
}

Summary summarize(const Scenario& scenario, const Cluster& cluster, const Topology& topology, const Trace& trace,
                  const std::vector<double>& link_bytes, double end_s, bool horizon_reached, std::uint64_t seed,
                  std::uint64_t events) {
  SummaryFold fold(scenario, cluster);
  fold.add(trace, trace.instances.size(), end_s);
  return fold.finish(trace, topology, link_bytes, end_s, horizon_reached, seed, events);
}

}  // namespace fleetsim
