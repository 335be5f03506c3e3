#include "replay.hpp"

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "fleetsim/summary.hpp"

namespace fleetsim::replay {

PlanIndex index_plan(const Scenario& scenario, const RunResult& plan, Trace& trace) {
  PlanIndex ix;
  ix.first_record.assign(trace.instances.size(), std::numeric_limits<std::uint32_t>::max());
  for (std::uint32_t rec = 0; rec < trace.tasks.size(); ++rec) {
    std::uint32_t& first = ix.first_record[index(trace.tasks[rec].instance)];
    first = std::min(first, rec);
  }
  ix.loads_of.assign(trace.tasks.size(), {});
  for (std::uint32_t i = 0; i < trace.weight_loads.size(); ++i) ix.loads_of[index(trace.weight_loads[i].task)].push_back(i);
  for (std::uint32_t rec = 0; rec < trace.tasks.size(); ++rec) {
    TaskRecord& r = trace.tasks[rec];
    if (r.status != TaskStatus::completed) continue;  // kept as the plan left it
    ix.replayed.push_back(rec);
    r.ready_s = r.start_s = r.compute_start_s = r.comm_start_s = r.end_s = kNever;
    r.status = TaskStatus::queued;
  }
  // Every rank and thread must see one order that puts producers before consumers.
  std::vector<std::vector<std::uint32_t>> topo_position(scenario.workflows.size());
  for (std::size_t w = 0; w < scenario.workflows.size(); ++w) {
    const std::vector<std::uint32_t>& order = scenario.workflows[w].topological_order();
    topo_position[w].resize(order.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) topo_position[w][order[i]] = i;
  }
  auto key = [&](std::uint32_t rec) {
    const TaskRecord& r = plan.trace.tasks[rec];
    return std::tuple(r.start_s, topo_position[r.workflow][r.task], rec);
  };
  std::sort(ix.replayed.begin(), ix.replayed.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  return ix;
}

void order_phases(const Scenario& scenario, const PlanIndex& plan, Trace& trace) {
  for (std::uint32_t rec : plan.replayed) {  // in the plan's start order: producers first
    TaskRecord& r = trace.tasks[rec];
    const Workflow& wf = scenario.workflows[r.workflow];
    r.ready_s = trace.instances[index(r.instance)].arrival_s;
    for (std::uint32_t e : wf.inputs(r.task)) r.ready_s = std::max(r.ready_s, trace.tasks[plan.record_of(r.instance, wf.edges[e].from)].end_s);
    r.start_s = std::max(r.start_s, r.ready_s);
    r.compute_start_s = std::max(r.compute_start_s, r.start_s);
    for (std::uint32_t i : plan.loads_of[rec]) {
      WeightLoad& load = trace.weight_loads[i];
      if (load.start_s == kNever) continue;
      load.start_s = std::max(load.start_s, r.start_s);
      load.end_s = std::max(load.end_s, load.start_s);
      r.compute_start_s = std::max(r.compute_start_s, load.end_s);
    }
    if (r.comm_start_s != kNever) r.comm_start_s = std::max(r.comm_start_s, r.compute_start_s);
    r.end_s = std::max(r.end_s, std::max(r.compute_start_s, r.comm_start_s));
  }
}

RunResult measured_result(const Scenario& scenario, const RunResult& plan, Trace trace) {
  RunResult out{.cluster = plan.cluster, .topology = Topology(plan.cluster, scenario.cluster.fabric), .trace = std::move(trace),
                .summary = {}, .link_bytes = {}, .link_samples = {}, .vram_samples = {}};
  double end_s = 0;
  for (InstanceRecord& inst : out.trace.instances) inst.end_s = kNever;
  std::vector<std::uint32_t> left(out.trace.instances.size(), 0);
  for (const TaskRecord& r : out.trace.tasks) {
    if (r.status != TaskStatus::completed) ++left[index(r.instance)];
  }
  for (const TaskRecord& r : out.trace.tasks) {
    InstanceRecord& inst = out.trace.instances[index(r.instance)];
    if (r.status == TaskStatus::failed) inst.failed = true;
    if (r.end_s != kNever) end_s = std::max(end_s, r.end_s);
    if (left[index(r.instance)] == 0) inst.end_s = std::max(inst.end_s, r.end_s);
  }
  out.link_bytes.assign(out.topology.links().size(), 0.0);
  out.summary = summarize(scenario, out.cluster, out.topology, out.trace, out.link_bytes, end_s, false, plan.summary.seed, 0);
  return out;
}

std::string wait_for_inputs(const Scenario& sc, const Trace& trace, const PlanIndex& plan, std::uint32_t rec,
                            std::chrono::steady_clock::time_point t0, std::unique_lock<std::mutex>& lock,
                            std::condition_variable& changed, const std::vector<std::uint8_t>& ended,
                            const std::function<void(std::uint32_t)>& producer) {
  using Clock = std::chrono::steady_clock;
  const TaskRecord& r = trace.tasks[rec];
  const Workflow& wf = sc.workflows[r.workflow];
  const auto arrival = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(trace.instances[index(r.instance)].arrival_s));
  changed.wait_until(lock, arrival, [&] { return Clock::now() >= arrival; });
  std::string reason;
  for (std::uint32_t e : wf.inputs(r.task)) {
    const std::uint32_t p = plan.record_of(r.instance, wf.edges[e].from);
    changed.wait(lock, [&] { return ended[p] != 0; });
    producer(p);
    if (trace.tasks[p].status != TaskStatus::completed) reason = "its producer " + wf.tasks[wf.edges[e].from].name + " did not complete";
  }
  return reason;
}

}  // namespace fleetsim::replay
