#include "fleetsim/invariants.hpp"

#include <algorithm>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"

namespace fleetsim {
namespace {

std::string where(const Scenario& sc, const TaskRecord& t) {
  const Workflow& wf = sc.workflows[t.workflow];
  return "task \"" + wf.tasks[t.task].name + "\" of workflow \"" + wf.id + "\" (instance " +
         std::to_string(index(t.instance)) + ")";
}

}  // namespace

void check_invariants(const Scenario& sc, const RunResult& run) {
  const Trace& trace = run.trace;
  const double end = run.summary.end_s;
  const double eps = 1e-9 * std::max(1.0, end);
  Counts counts;
  std::vector<std::vector<std::pair<double, double>>> busy(run.cluster.gpu_count());
  std::vector<std::uint32_t> first_task(trace.instances.size(), 0);
  for (std::size_t i = 0, t = 0; i < trace.instances.size(); ++i) {
    first_task[i] = static_cast<std::uint32_t>(t);
    t += sc.workflows[trace.instances[i].workflow].tasks.size();
  }

  for (const TaskRecord& t : trace.tasks) {
    if (trace.instance(index(t.instance)).arrival_s == kNever) {
      FLEETSIM_CHECK(t.status == TaskStatus::queued && t.ready_s == kNever, "a task ran before its workflow came");
      continue;
    }
    ++counts.submitted;
    // Named only when a check fails: building the name for every task would cost more than the checks.
    const auto at = [&] { return where(sc, t); };
    const bool started = t.start_s != kNever;
    switch (t.status) {
      case TaskStatus::queued:
        ++counts.queued;
        FLEETSIM_CHECK(!started && t.end_s == kNever, at() + " is queued but has start or end times");
        break;
      case TaskStatus::running:
        ++counts.running;
        FLEETSIM_CHECK(started && t.end_s == kNever, at() + " is running without a start or with an end");
        break;
      case TaskStatus::completed:
        ++counts.completed;
        FLEETSIM_CHECK(started && t.ready_s <= t.start_s && t.start_s <= t.compute_start_s &&
                           t.compute_start_s <= t.end_s + eps && t.end_s <= end + eps,
                       at() + " completed with times out of order");
        FLEETSIM_CHECK(t.comm_start_s == kNever || (t.comm_start_s >= t.compute_start_s - eps && t.comm_start_s <= t.end_s + eps),
                       at() + " has a collective outside its run");
        break;
      case TaskStatus::failed:
        ++counts.failed;
        FLEETSIM_CHECK(t.reason != 0 && t.end_s != kNever, at() + " failed without a reason or an end");
        break;
    }
    FLEETSIM_CHECK(started == (t.gpu_count > 0), at() + " has GPUs without a start, or a start without GPUs");
    if (started) {
      const Workflow& wf = sc.workflows[t.workflow];
      const TaskSpec& spec = wf.tasks[t.task];
      FLEETSIM_CHECK(spec.runs_on(t.gpu_count), at() + " ran on a gang of the wrong size");
      for (std::uint32_t e : wf.inputs(t.task)) {
        const TaskRecord& producer = trace.tasks[first_task[index(t.instance) - trace.instances_dropped] + wf.edges[e].from];
        FLEETSIM_CHECK(producer.status == TaskStatus::completed && producer.end_s <= t.start_s + eps,
                       at() + " started before its input from \"" + wf.tasks[wf.edges[e].from].name + "\" was done");
      }
      const double until = t.end_s == kNever ? end : t.end_s;
      // A batch shares its leader's GPU and ends with it; only the leader occupies the GPU.
      const std::uint32_t self = index(trace.id_of(t));
      if (t.batched_with != 0 && t.batched_with != self + 1) {
        const TaskRecord& leader = trace.task(make_id<TaskId>(t.batched_with - 1));
        FLEETSIM_CHECK(leader.batched_with == t.batched_with && trace.gpus[leader.gpu_begin] == trace.gpus[t.gpu_begin] &&
                           leader.end_s == t.end_s && leader.compute_start_s == t.compute_start_s,
                       at() + " was batched but did not share its leader's GPU and times");
        continue;
      }
      FLEETSIM_CHECK(t.resized_s == kNever || (spec.elastic && t.resized_s >= t.start_s && t.resized_s <= until + eps),
                     at() + " was resized but is not elastic, or outside its run");
      for (std::uint32_t i = 0; i < t.gpu_count; ++i) busy[index(trace.gpus[t.gpu_begin + i])].emplace_back(gang_start_s(t), until);
    }
  }
  // The gangs tasks held before a resize (elastic tasks) or a stop occupy their GPUs too.
  for (const LeftGang& left : trace.left_gangs) {
    const TaskSpec& spec = sc.workflows[trace.task(left.task).workflow].tasks[trace.task(left.task).task];
    FLEETSIM_CHECK((spec.elastic || left.stopped) && spec.runs_on(left.gpu_count) && left.start_s <= left.end_s + eps,
                   where(sc, trace.task(left.task)) + " held a gang it could not have been resized from");
    for (std::uint32_t i = 0; i < left.gpu_count; ++i) busy[index(trace.gpus[left.gpu_begin + i])].emplace_back(left.start_s, left.end_s);
  }
  // The summary counted the records a run dropped as it went too (RunOptions::keep_records false).
  const Counts& s = run.summary.tasks;
  FLEETSIM_CHECK(trace.tasks_dropped > 0 || (counts.submitted == s.submitted && counts.completed == s.completed && counts.failed == s.failed &&
                                             counts.running == s.running && counts.queued == s.queued),
                 "the summary's task counts differ from the trace");

  // No more tasks at once on a GPU than it may run: one, unless it is time-sliced.
  std::vector<std::pair<double, int>> marks;
  for (std::size_t g = 0; g < busy.size(); ++g) {
    const GpuId gpu = make_id<GpuId>(static_cast<std::uint32_t>(g));
    const int slots = run.cluster.group(run.cluster.node_of(gpu)).time_sliced_tasks;
    marks.clear();
    for (const auto& [from, until] : busy[g]) {
      marks.emplace_back(from, +1);
      marks.emplace_back(until - eps, -1);  // a task may start as another ends
    }
    std::sort(marks.begin(), marks.end());
    int running = 0;
    for (const auto& mark : marks) {
      running += mark.second;
      FLEETSIM_CHECK(running <= slots, "GPU " + run.cluster.gpu_name(gpu) + " ran " + std::to_string(running) +
                                           " tasks at once; it may run " + std::to_string(slots));
    }
  }
}

}  // namespace fleetsim
