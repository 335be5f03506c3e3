#include <cstdio>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "fleetsim/compute.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"
#include "readable.hpp"
#include "serving_parts.hpp"
#include "training_parts.hpp"

namespace fleetsim {
namespace {

std::string slo_text(const SloResult& r) {
  std::string text = r.metric;
  if (r.metric == "attainment") text += " within " + format_quantity(r.within_s, Dimension::time);
  return text + (r.at_least ? " >= " : " <= ") + format_slo_value(r.metric, r.target) + "  (actual " + format_slo_value(r.metric, r.actual) + ")";
}

using nlohmann::ordered_json;

ordered_json counts_json(const Counts& c) {
  return {{"submitted", c.submitted}, {"completed", c.completed}, {"failed", c.failed},
          {"running", c.running},     {"queued", c.queued}};
}

ordered_json latency_json(const LatencyStats& l) {
  return {{"count", l.count}, {"mean", l.mean}, {"p50", l.p50}, {"p95", l.p95}, {"p99", l.p99}, {"max", l.max}};
}

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string time_or_dash(const LatencyStats& l, double value) {
  return l.count == 0 ? "-" : format_quantity(value, Dimension::time);
}

}  // namespace

void write_training_results(std::ostream& out, const std::vector<TrainingResult>& results) {
  char line[200];
  std::snprintf(line, sizeof line, "%-16s %5s %9s %11s %10s %10s %10s %9s %10s %6s\n", "training", "GPUs", "TPxPPxDP", "iterations",
                "mean", "p95", "alone", "slowdown", "tokens/s", "MFU");
  out << line;
  for (const TrainingResult& r : results) {
    const TrainingIteration& it = *r.iteration;
    // CP and a mixture of experts' EP, where a job has them (the gang is tp x cp x pp x dp).
    std::string shape = std::to_string(it.tp) + "x" + std::to_string(it.pp) + "x" + std::to_string(it.dp);
    if (it.cp > 1) shape += " cp" + std::to_string(it.cp);
    if (it.ep > 1) shape += " ep" + std::to_string(it.ep);
    const std::string done = std::to_string(r.completed) + "/" + std::to_string(r.iterations);
    const bool any = r.iteration_s.count > 0;
    std::snprintf(line, sizeof line, "  %-14s %5d %9s %11s %10s %10s %10s %9s %10s %6s\n", it.job.c_str(), it.gpus, shape.c_str(), done.c_str(),
                  time_or_dash(r.iteration_s, r.iteration_s.mean).c_str(), time_or_dash(r.iteration_s, r.iteration_s.p95).c_str(),
                  r.alone_s > 0 ? format_quantity(r.alone_s, Dimension::time).c_str() : "-", any ? fmt("%.2fx", r.slowdown).c_str() : "-",
                  any ? format_number(r.tokens_per_s).c_str() : "-", any ? fmt("%.1f%%", 100 * r.mfu).c_str() : "-");
    out << line;
  }
  for (const TrainingResult& r : results) {
    const TrainingIteration& it = *r.iteration;
    if (it.checkpoint_every == 0) continue;
    out << "  checkpoint    " << it.job << ": every " << it.checkpoint_every << " iterations, " << format_quantity(it.checkpoint_bytes_per_gpu, Dimension::bytes)
        << " a GPU; " << r.checkpoints << " saved, each holding its iteration up " << format_quantity(r.checkpoint_s, Dimension::time) << "; "
        << r.rollbacks << " rollback" << (r.rollbacks == 1 ? "" : "s") << " to the last save (" << format_quantity(r.checkpoint_load_s, Dimension::time)
        << " to read it back), " << r.iterations_rolled_back << " iteration" << (r.iterations_rolled_back == 1 ? "" : "s") << " computed again\n";
  }
  for (const TrainingResult& r : results) {
    const TrainingIteration& it = *r.iteration;
    if (it.elastic_dp.empty()) continue;
    out << "  elastic       " << it.job << ": iterations completed at DP";
    for (std::size_t i = 0; i < it.elastic_dp.size(); ++i) {
      out << (i == 0 ? " " : ", ") << it.elastic_dp[i] << ": " << (i < r.completed_at_dp.size() ? r.completed_at_dp[i] : 0);
    }
    out << "; " << r.restarts << " restart" << (r.restarts == 1 ? "" : "s") << " on other GPUs, " << format_quantity(it.elastic_restart_s, Dimension::time)
        << " each; MFU over the GPUs each iteration held\n";
  }
  const auto any = [&](auto has) { return std::any_of(results.begin(), results.end(), [&](const TrainingResult& r) { return has(*r.iteration); }); };
  const bool experts = any([](const TrainingIteration& it) { return it.ep_calls > 0 || it.expert_dp_bytes > 0; });
  const bool stages = any([](const TrainingIteration& it) { return it.pp_calls > 0; });
  const bool rings = any([](const TrainingIteration& it) { return it.cp_calls > 0; });
  const bool tp = any([](const TrainingIteration& it) { return it.tp_calls > 0 || it.etp_calls > 0; });
  out << "an iteration counts from the previous one's end (the first from its start); alone: the iteration by itself on its GPU type,\n"
         "its reduction on one switch; each job's compute is timed alone (TP inside a node, stage sends on one switch) and its\n"
         "data-parallel gradient all-reduce runs on the shared network beside every other flow";
  std::vector<std::string> also;
  if (experts) also.emplace_back("a mixture's expert-gradient\nreduction and expert all-to-alls");
  if (stages) also.emplace_back("the stage sends");
  if (rings) also.emplace_back("the context-parallel ring passes");
  for (std::size_t i = 0; i < also.size(); ++i) out << (i == 0 ? ", as do " : " and ") << also[i];
  if (!also.empty()) out << " (beside the compute, whose time holds theirs alone)";
  if (tp) out << ";\na TP group the placement splits across nodes runs its all-reduces there too, after the compute";
  out << " (docs/training.md)\n";
}

ordered_json training_results_json(const std::vector<TrainingResult>& results) {
  ordered_json list = ordered_json::array();
  for (const TrainingResult& r : results) {
    const TrainingIteration& it = *r.iteration;
    list.push_back({{"job", it.job}, {"gpu", r.gpu}, {"gpus", it.gpus}, {"tp", it.tp}, {"pp", it.pp}, {"dp", it.dp}, {"cp", it.cp}, {"ep", it.ep},
                    {"iterations", r.iterations}, {"completed", r.completed}, {"iteration_s", latency_json(r.iteration_s)},
                    {"alone_s", r.alone_s}, {"slowdown", r.slowdown}, {"tokens_per_s", r.tokens_per_s}, {"mfu", r.mfu},
                    {"dp_allreduce_bytes", it.dp_bytes}});
    if (it.expert_dp_bytes > 0) list.back()["expert_allreduce_bytes"] = it.expert_dp_bytes;
    if (it.ep_calls > 0) list.back()["expert_alltoall"] = {{"calls", it.ep_calls}, {"bytes", it.ep_bytes}};
    if (it.pp_calls > 0) list.back()["stage_sends"] = {{"calls", it.pp_calls}, {"bytes", it.pp_bytes}};
    if (it.cp_calls > 0) list.back()["context_parallel_passes"] = {{"calls", it.cp_calls}, {"bytes", it.cp_bytes}};
    if (!it.elastic_dp.empty()) {
      list.back()["elastic"] = {{"dp", it.elastic_dp}, {"completed_at_dp", r.completed_at_dp}, {"restarts", r.restarts}, {"restart_s", it.elastic_restart_s}};
    }
    if (it.checkpoint_every > 0) {
      list.back()["checkpoint"] = {{"every", it.checkpoint_every}, {"bytes_per_gpu", it.checkpoint_bytes_per_gpu}, {"saved", r.checkpoints},
                                   {"save_s", r.checkpoint_s}, {"load_s", r.checkpoint_load_s}, {"rollbacks", r.rollbacks},
                                   {"iterations_rolled_back", r.iterations_rolled_back}};
    }
  }
  return list;
}

std::string summary_json(const Summary& s) {
  ordered_json j;
  j["scenario"] = s.scenario;
  j["policy"] = s.policy;
  j["instance_placement"] = s.one_gpu_instances ? "one-gpu" : "spread";
  if (s.max_min_tolerance) j["max_min_tolerance"] = *s.max_min_tolerance;
  j["seed"] = s.seed;
  j["cluster"] = {{"nodes", s.nodes}, {"gpus", s.gpus}};
  j["makespan_s"] = s.makespan_s;
  j["end_s"] = s.end_s;
  j["horizon_reached"] = s.horizon_reached;
  j["stalled"] = s.stalled;
  j["diverged"] = s.diverged;
  j["tasks"] = counts_json(s.tasks);
  j["workflows"] = counts_json(s.workflows);
  j["latency_s"] = latency_json(s.latency_s);
  j["gpu_utilization"] = s.gpu_utilization;
  j["gpu_busy_s"] = s.gpu_busy_s;
  j["bytes_transferred"] = s.bytes_transferred;
  j["link_bytes"] = {{"gpu_link", s.gpu_link_bytes}, {"host_link", s.host_link_bytes}, {"nic", s.nic_bytes},
                     {"fabric", s.fabric_bytes}, {"storage", s.storage_bytes}};
  j["cost_usd"] = s.cost_usd;
  j["weights"] = {{"loads", s.weight_loads}, {"bytes_loaded", s.weight_bytes_loaded}, {"load_s", s.weight_load_s},
                  {"evictions", s.evictions}, {"storage_reads", s.storage_reads}, {"batches", s.batches}, {"batched_tasks", s.batched_tasks}, {"offloaded_tasks", s.offloaded_tasks}, {"offload_bytes", s.offload_bytes}};
  j["faults"] = {{"gpu_failures", s.gpu_failures}, {"spot_preemptions", s.spot_preemptions}, {"tasks_stopped", s.tasks_stopped}, {"retries", s.retries},
                 {"tasks_preempted", s.tasks_preempted}, {"link_failures", s.link_failures}, {"flows_rerouted", s.flows_rerouted},
                 {"lost_gpu_s", s.lost_gpu_s}, {"availability", s.availability}, {"goodput", s.goodput},
                 {"mean_recovery_s", s.mean_recovery_s}};
  j["elastic"] = {{"resizes", s.resizes}, {"restart_gpu_s", s.restart_gpu_s}};
  j["autoscale"] = {{"node_s_on", s.node_s_on}, {"nodes_started", s.nodes_started}, {"nodes_stopped", s.nodes_stopped}};
  j["vram_peak_utilization"] = s.vram_peak_utilization;
  j["vram_utilization"] = s.vram_utilization;
  j["energy_j"] = s.energy_j;
  j["fairness_jain"] = s.fairness;
  j["spilled_bytes"] = s.spilled_bytes;
  j["events"] = s.events;
  const auto groups = [](const std::vector<TenantSummary>& list, bool slowdown) {
    ordered_json a = ordered_json::array();
    for (const TenantSummary& t : list) {
      ordered_json g{{"name", t.name}, {"workflows", counts_json(t.workflows)}, {"latency_s", latency_json(t.latency_s)}, {"mean_wait_s", t.mean_wait_s}};
      if (slowdown) g["mean_slowdown"] = t.mean_slowdown;
      g["throughput_per_s"] = t.throughput_per_s;
      g["gpu_s"] = t.gpu_s;
      a.push_back(std::move(g));
    }
    return a;
  };
  j["tenants"] = groups(s.tenants, true);
  j["classes"] = groups(s.classes, false);
  ordered_json slos = ordered_json::array();
  for (const SloResult& r : s.slos) {
    nlohmann::ordered_json slo{{"tenant", r.tenant}, {"class", r.work_class}, {"metric", r.metric}, {"target", r.target}, {"actual", r.actual}, {"met", r.met}};
    if (!r.deployment.empty()) slo["deployment"] = r.deployment;
    if (r.metric == "attainment") slo["within_s"] = r.within_s;
    slos.push_back(slo);
  }
  j["slos"] = slos;
  if (!s.serving.empty()) {
    ordered_json serving = ordered_json::array();
    for (const ServingResult& r : s.serving) serving.push_back(serving_results_json(*r.deployment, r));
    j["serving"] = serving;
  }
  if (!s.training.empty()) j["training"] = training_results_json(s.training);
  if (!s.recorded_runs.empty()) {
    ordered_json recorded = ordered_json::array();
    for (const RecordedCheck& c : s.recorded_runs) {
      recorded.push_back({{"workflow", c.workflow}, {"recorded_makespan_s", c.recorded_s}, {"simulated_makespan_s", c.simulated_s}, {"instances", c.instances},
                          {"recorded_on", c.machines}});
    }
    j["recorded_runs"] = recorded;
  }
  if (!s.uneven_uplinks.empty()) {
    ordered_json uneven = ordered_json::array();
    for (const UnevenUplinks& u : s.uneven_uplinks) {
      uneven.push_back({{"leaf", u.leaf}, {"uplinks", u.uplinks}, {"min_bytes", u.min_bytes}, {"max_bytes", u.max_bytes}, {"mean_bytes", u.mean_bytes}});
    }
    j["uneven_uplinks"] = uneven;
  }
  return j.dump(2) + "\n";
}

void write_summary_text(std::ostream& out, const Scenario& scenario, const Summary& s) {
  out << "scenario   " << s.scenario << "  (policy " << s.policy << ", seed " << s.seed << ")\n";
  if (!scenario.description.empty()) out << "           " << scenario.description << "\n";
  if (s.one_gpu_instances) {
    out << "placement  one GPU an instance, as stock ComfyUI runs a prompt: the policy placed each instance's first task, the rest ran on that GPU one at a time, "
           "the GPU held until the instance ended\n";
  }
  out << "cluster    " << s.nodes << " nodes, " << s.gpus << " GPUs:";
  for (const NodeGroup& g : scenario.cluster.groups) {
    out << " " << g.count << "x " << g.node.id;
    if (g.mig_slices > 1) out << " (MIG: " << g.mig_slices << " instances per GPU)";
  }
  out << "\n";
  // A constant borrowed from another GPU is said beside the numbers it feeds.
  for (const std::string& b : borrowed_kernel_constants(scenario.cluster, scenario.workflows, !scenario.serving.empty())) out << "borrowed   " << b << "\n";
  out << "makespan   " << format_quantity(s.makespan_s, Dimension::time);
  if (s.horizon_reached) out << "  (stopped at the horizon, " << format_quantity(s.end_s, Dimension::time) << ")";
  if (s.diverged) out << "  (stopped early at " << format_quantity(s.end_s, Dimension::time) << ": the queue grew past its limit)";
  out << "\n";
  if (s.stalled) {
    out << "STALLED    the run ran out of events while ready tasks waited: no GPU could ever take them\n"
        << "           (VRAM held by output tensors whose consumers cannot fit?)\n";
  }
  out << "tasks      " << s.tasks.submitted << " submitted: " << s.tasks.completed << " completed, "
      << s.tasks.failed << " failed, " << s.tasks.running << " running, " << s.tasks.queued << " queued\n";
  out << "workflows  " << s.workflows.submitted << " submitted: " << s.workflows.completed << " completed, "
      << s.workflows.failed << " failed, " << s.workflows.running << " running, " << s.workflows.queued
      << " queued\n";
  // A recorded run beside the simulated one, and why the two platforms differ.
  for (const RecordedCheck& c : s.recorded_runs) {
    out << "recorded   " << c.workflow << ": makespan " << format_quantity(c.recorded_s, Dimension::time) << " as recorded ("
        << (c.machines.empty() ? "on machines the instance does not name" : "on " + c.machines) << "); ";
    if (c.instances == 0) {
      out << "no instance of it completed here\n";
    } else {
      out << format_quantity(c.simulated_s, Dimension::time)
          << (c.recorded_s > 0 ? " simulated (" + fmt("%+.1f%%", 100.0 * (c.simulated_s / c.recorded_s - 1)) + ")" : std::string(" simulated"))
          << (c.instances > 1 ? ", the mean of " + std::to_string(c.instances) + " instances" : std::string()) << "\n";
    }
    out << "           the platforms differ: each task's recorded runtime is taken as its work on one GPU here, so this checks the\n"
        << "           schedule and the data movement on this cluster, not the recorded machines' speed\n";
  }
  out << "GPU util   " << fmt("%.1f %%", 100.0 * s.gpu_utilization) << "   VRAM util " << fmt("%.1f %%", 100.0 * s.vram_utilization)
      << "   cost " << dollars(s.cost_usd) << "   energy " << format_number(s.energy_j / 3.6e6) << " kWh"
      << "   fairness (Jain) " << fmt("%.2f", s.fairness) << "\n";
  out << "network    edge tensors " << format_quantity(s.bytes_transferred, Dimension::bytes)
      << "; carried by GPU links " << format_quantity(s.gpu_link_bytes, Dimension::bytes) << ", host links "
      << format_quantity(s.host_link_bytes, Dimension::bytes) << ", NICs " << format_quantity(s.nic_bytes, Dimension::bytes)
      << ", fabric " << format_quantity(s.fabric_bytes, Dimension::bytes);
  if (s.storage_bytes > 0) out << ", storage " << format_quantity(s.storage_bytes, Dimension::bytes);
  out << "\n";
  if (s.max_min_tolerance) {
    out << "           links shared max-min within a relative " << fmt("%g", *s.max_min_tolerance)
        << " (max_min_tolerance, a bounded-error option: rates and so transfer times move with it; reports/performance.md section 25)\n";
  }
  // ECMP's uneven splits, the most uneven first (three at most, then how many more).
  for (std::size_t k = 0; k < s.uneven_uplinks.size() && k < 3; ++k) {
    const UnevenUplinks& u = s.uneven_uplinks[k];
    out << (k == 0 ? "ECMP       " : "           ") << u.leaf << "'s " << u.uplinks << " uplinks carried " << format_quantity(u.min_bytes, Dimension::bytes) << " to "
        << format_quantity(u.max_bytes, Dimension::bytes) << ": the busiest " << fmt("%.2f", u.max_bytes / u.mean_bytes)
        << "x their mean (flows hashed onto few spines)\n";
  }
  if (s.uneven_uplinks.size() > 3) out << "           and " << s.uneven_uplinks.size() - 3 << " more leaves as uneven\n";
  out << "weights    " << s.weight_loads << " loads (" << format_quantity(s.weight_bytes_loaded, Dimension::bytes) << ", "
      << format_quantity(s.weight_load_s, Dimension::time) << " in all" << (s.storage_reads > 0 ? ", " + std::to_string(s.storage_reads) + " from storage" : std::string())
      << "), " << s.evictions << " evictions; peak VRAM "
      << fmt("%.0f %%", 100.0 * s.vram_peak_utilization) << " of a GPU\n";
  if (s.batches > 0) {
    out << "batching   " << s.batched_tasks << " tasks ran in " << s.batches << " batches ("
        << fmt("%.2f", static_cast<double>(s.batched_tasks) / static_cast<double>(s.batches)) << " per batch)\n";
  }
  if (s.offloaded_tasks > 0) {
    out << "offload    " << s.offloaded_tasks << " tasks kept " << format_quantity(s.offload_bytes, Dimension::bytes)
        << " of working sets in host memory for want of VRAM\n";
  }
  if (s.node_s_on > 0) {
    out << "autoscale  " << fmt("%.2f", s.end_s > 0 ? s.node_s_on / s.end_s : 0) << " nodes on on average ("
        << fmt("%.1f", s.node_s_on / 3600) << " node-hours billed), " << s.nodes_started << " started, " << s.nodes_stopped << " stopped\n";
  }
  if (s.gpu_failures > 0 || s.spot_preemptions > 0) {
    out << "faults     " << s.gpu_failures << " GPU failures and " << s.spot_preemptions << " spot preemptions stopped " << s.tasks_stopped << " tasks (" << s.retries << " retried); "
        << format_quantity(s.lost_gpu_s, Dimension::time) << " GPU-time lost; availability " << fmt("%.2f %%", 100.0 * s.availability)
        << ", goodput " << fmt("%.2f %%", 100.0 * s.goodput) << ", mean recovery " << format_quantity(s.mean_recovery_s, Dimension::time) << "\n";
  }
  if (s.resizes > 0) {
    out << "elastic    " << s.resizes << " resizes of elastic tasks (each a restart that kept the work done); "
        << format_quantity(s.restart_gpu_s, Dimension::time) << " GPU-time restarting\n";
  }
  if (s.link_failures > 0) {
    out << "links      " << s.link_failures << " link failures; " << s.flows_rerouted << " flows rerouted around them"
        << (s.gpu_failures > 0 || s.spot_preemptions > 0 ? "" : "; " + std::to_string(s.tasks_stopped) + " tasks stopped (" + std::to_string(s.retries) + " retried)") << "\n";
  }
  if (s.tasks_preempted > 0) {
    out << "preempted  " << s.tasks_preempted << " task runs stopped by the policy to make room (each ready again at once); "
        << format_quantity(s.lost_gpu_s, Dimension::time) << " GPU-time lost to stops in all\n";
  }
  out << "\n";

  char line[160];
  const bool serving_only = s.workflows.submitted == 0 && !s.serving.empty();
  std::snprintf(line, sizeof line, "%-18s %9s %10s %10s %10s %10s %10s %9s\n", "latency (workflow)", "completed",
                "mean", "p50", "p95", "p99", "task wait", "slowdown");
  auto row = [&](const std::string& name, const LatencyStats& l, const TenantSummary* t) {
    std::snprintf(line, sizeof line, "%-18s %9llu %10s %10s %10s %10s %10s %9s\n", name.c_str(),
                  static_cast<unsigned long long>(l.count), time_or_dash(l, l.mean).c_str(),
                  time_or_dash(l, l.p50).c_str(), time_or_dash(l, l.p95).c_str(), time_or_dash(l, l.p99).c_str(),
                  t != nullptr ? format_quantity(t->mean_wait_s, Dimension::time).c_str() : "",
                  t != nullptr && l.count > 0 ? fmt("%.2fx", t->mean_slowdown).c_str() : "");
    out << line;
  };
  if (!serving_only) {
    out << line;
    for (const TenantSummary& t : s.tenants) row("  " + t.name, t.latency_s, &t);
    for (const TenantSummary& c : s.classes) row("class " + c.name, c.latency_s, nullptr);
    row("all", s.latency_s, nullptr);
  }
  if (!s.slos.empty()) {
    out << "\nSLOs\n";
    for (const SloResult& r : s.slos) {
      out << "  " << (r.met ? "met    " : "MISSED ") << slo_scope(r) << " " << slo_text(r) << "\n";
    }
  }
  if (!s.training.empty()) {
    out << "\n";
    write_training_results(out, s.training);
  }
  for (const ServingResult& r : s.serving) {
    out << "\nserving\n";
    write_serving_results(out, *r.deployment, r);
  }
  if (!s.serving.empty()) {
    out << "\nserving beside other work: replicas start warm (weights loaded, KV cache allocated) and hold their GPUs all run;\n"
           "their TP all-reduces and pipeline stage sends are timed on their own links alone, not shared with the tasks'\n"
           "flows (a disaggregated deployment's KV transfers do share the network with them); a failed GPU takes its\n"
           "replica down until repaired; replicas are autoscaled only where a deployment asks (autoscale); not modelled\n"
           "yet: EP, cascade attention (docs/serving.md)\n";
  }
}

}  // namespace fleetsim
