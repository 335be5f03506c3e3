#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"

namespace fleetsim {
namespace {

std::string task_label(const Scenario& sc, const TaskRecord& r) {
  return sc.workflows[r.workflow].id + "#" + std::to_string(index(r.instance)) + "/" + sc.workflows[r.workflow].tasks[r.task].name;
}

}  // namespace

void write_schedule_text(std::ostream& out, const Scenario& sc, const RunResult& plan) {
  std::vector<std::vector<std::uint32_t>> by_gpu(plan.cluster.gpu_count());
  for (std::uint32_t i = 0; i < plan.trace.tasks.size(); ++i) {
    const TaskRecord& r = plan.trace.tasks[i];
    if (r.start_s == kNever) continue;
    for (std::uint32_t m = 0; m < r.gpu_count; ++m) by_gpu[index(plan.trace.gpus[r.gpu_begin + m])].push_back(i);
  }
  char line[256];
  for (std::uint32_t g = 0; g < by_gpu.size(); ++g) {
    std::vector<std::uint32_t>& tasks = by_gpu[g];
    if (tasks.empty()) continue;
    std::stable_sort(tasks.begin(), tasks.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return plan.trace.tasks[a].start_s < plan.trace.tasks[b].start_s; });
    out << plan.cluster.gpu_name(make_id<GpuId>(g)) << " (" << tasks.size() << " tasks)\n";
    for (std::uint32_t i : tasks) {
      const TaskRecord& r = plan.trace.tasks[i];
      std::snprintf(line, sizeof line, "  %12.6f %12.6f  %-9s ", r.start_s, r.end_s, std::string(task_status_name(r.status)).c_str());
      out << line << task_label(sc, r) << (r.gpu_count > 1 ? " (gang of " + std::to_string(r.gpu_count) + ")" : "") << '\n';
    }
  }
}

void write_trace_diff_text(std::ostream& out, const TraceDiff& diff) {
  char line[256];
  std::snprintf(line, sizeof line, "tasks compared      %zu\n", diff.tasks.size());
  out << line;
  std::snprintf(line, sizeof line, "task error          median %.1f%%  p90 %.1f%%  max %.1f%%  mean (MAPE) %.1f%%\n",
                100 * diff.median_abs_error, 100 * diff.p90_abs_error, 100 * diff.max_abs_error, 100 * diff.mean_abs_error);
  out << line;
  std::snprintf(line, sizeof line, "makespan            predicted %.6g s  measured %.6g s  error %+.1f%%\n", diff.predicted_makespan_s,
                diff.measured_makespan_s, 100 * diff.makespan_error());
  out << line;
  if (diff.runs > 1) {
    std::snprintf(line, sizeof line, "measured            the median of %zu runs; run-to-run noise: task median %.1f%%, makespan %.1f%%\n", diff.runs,
                  100 * diff.task_noise, 100 * diff.makespan_noise);
    out << line;
  }
}

void write_trace_diff_csv(std::ostream& out, const Scenario& sc, const Trace& measured, const TraceDiff& diff) {
  out << "task,predicted_s,measured_s,relative_error\n";
  char line[128];
  for (const TaskError& e : diff.tasks) {
    std::snprintf(line, sizeof line, ",%.9g,%.9g,%.6f\n", e.predicted_s, e.measured_s, e.relative());
    out << task_label(sc, measured.tasks[e.record]) << line;
  }
}

void write_profile_check_text(std::ostream& out, std::span<const ProfileFigure> before, std::span<const ProfileFigure> after) {
  if (before.size() != after.size()) throw std::invalid_argument("a profile check needs the same figures before and after");
  out << "machine now         against the profile: before the runs / after them (+: faster than calibrated)\n";
  char line[256];
  double largest = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    std::snprintf(line, sizeof line, "  %-30s %-16s %+6.1f%% / %+6.1f%%\n", before[i].name.c_str(),
                  format_quantity(before[i].profile, before[i].unit).c_str(), 100 * before[i].change(), 100 * after[i].change());
    out << line;
    for (double c : {before[i].change(), after[i].change()}) largest = std::abs(c) > std::abs(largest) ? c : largest;
  }
  std::snprintf(line, sizeof line, "  the machine moved by up to %+.1f%% from its calibration: errors that size can be the machine's, not the model's\n",
                100 * largest);
  out << line;
}

std::string trace_diff_json(const TraceDiff& diff, std::span<const ProfileFigure> before, std::span<const ProfileFigure> after) {
  if (before.size() != after.size()) throw std::invalid_argument("a profile check needs the same figures before and after");
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
  for (const TaskError& e : diff.tasks) {
    tasks.push_back({{"record", e.record}, {"predicted_s", e.predicted_s}, {"measured_s", e.measured_s}, {"relative_error", e.relative()}});
  }
  nlohmann::ordered_json j{{"tasks_compared", diff.tasks.size()},
                           {"median_abs_error", diff.median_abs_error},
                           {"p90_abs_error", diff.p90_abs_error},
                           {"max_abs_error", diff.max_abs_error},
                           {"mape", diff.mean_abs_error},
                           {"predicted_makespan_s", diff.predicted_makespan_s},
                           {"measured_makespan_s", diff.measured_makespan_s},
                           {"makespan_error", diff.makespan_error()},
                           {"runs", diff.runs},
                           {"task_noise", diff.task_noise},
                           {"makespan_noise", diff.makespan_noise},
                           {"tasks", tasks}};
  if (!before.empty()) {
    nlohmann::ordered_json check = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < before.size(); ++i) {
      check.push_back({{"figure", before[i].name}, {"profile", before[i].profile}, {"before", before[i].measured}, {"after", after[i].measured}});
    }
    j["profile_check"] = check;
  }
  return j.dump(1) + "\n";
}

}  // namespace fleetsim
