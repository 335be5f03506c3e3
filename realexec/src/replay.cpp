#include "replay.hpp"

#include <algorithm>

#include "fleetsim/summary.hpp"

namespace fleetsim::replay {

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

}  // namespace fleetsim::replay
