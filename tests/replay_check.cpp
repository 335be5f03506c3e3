#include "replay_check.hpp"

namespace fleetsim::test {

std::vector<std::string> replay_problems(const Scenario& scenario, const RunResult& plan, const RunResult& measured) {
  std::vector<std::string> problems;
  const Trace& t = measured.trace;
  if (t.tasks.size() != plan.trace.tasks.size()) return {"the measured trace has " + std::to_string(t.tasks.size()) + " task records, the plan " +
                                                         std::to_string(plan.trace.tasks.size())};
  auto devices_of = [](const Trace& trace, const TaskRecord& r) {
    return std::vector<GpuId>(trace.gpus.begin() + r.gpu_begin, trace.gpus.begin() + r.gpu_begin + r.gpu_count);
  };
  auto shares_a_device = [&](const TaskRecord& a, const TaskRecord& b) {
    for (GpuId x : devices_of(t, a)) {
      for (GpuId y : devices_of(t, b)) {
        if (x == y) return true;
      }
    }
    return false;
  };
  for (std::size_t i = 0; i < t.tasks.size(); ++i) {
    const TaskRecord& m = t.tasks[i];
    const TaskRecord& p = plan.trace.tasks[i];
    const Workflow& wf = scenario.workflows[m.workflow];
    const std::string name = "record " + std::to_string(i) + " (" + wf.tasks[m.task].name + ")";
    if (p.status != TaskStatus::completed) continue;
    if (m.status != TaskStatus::completed) problems.push_back(name + " did not complete");
    if (devices_of(t, m) != devices_of(plan.trace, p)) problems.push_back(name + " ran on other devices than the plan's");
    const bool ordered = m.ready_s <= m.start_s && m.start_s <= m.compute_start_s && m.compute_start_s < m.end_s &&
                         (m.comm_start_s == kNever || (m.compute_start_s <= m.comm_start_s && m.comm_start_s <= m.end_s));
    if (!ordered) problems.push_back(name + "'s phases are out of order");
    if (m.start_s < t.instances[index(m.instance)].arrival_s) problems.push_back(name + " started before its instance arrived");
    for (std::uint32_t e : wf.inputs(m.task)) {
      if (t.tasks[i - m.task + wf.edges[e].from].end_s > m.start_s) problems.push_back(name + " started before its producer " + wf.tasks[wf.edges[e].from].name + " ended");
    }
    for (std::size_t j = 0; j < i; ++j) {
      const TaskRecord& o = t.tasks[j];
      if (o.status == TaskStatus::completed && shares_a_device(m, o) && o.end_s > m.start_s && m.end_s > o.start_s) {
        problems.push_back(name + " overlaps record " + std::to_string(j) + " on a device");
      }
    }
  }
  if (t.weight_loads.size() != plan.trace.weight_loads.size()) problems.push_back("the weight loads differ in number from the plan's");
  for (const WeightLoad& load : t.weight_loads) {
    const TaskRecord& r = t.tasks[index(load.task)];
    if (load.start_s == kNever || load.start_s < r.start_s || load.end_s > r.compute_start_s) {
      problems.push_back("a weight load of record " + std::to_string(index(load.task)) + " was not made inside its placement phase");
    }
  }
  return problems;
}

}  // namespace fleetsim::test
