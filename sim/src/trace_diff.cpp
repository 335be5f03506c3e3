#include "fleetsim/trace_diff.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "fleetsim/summary.hpp"

namespace fleetsim {
namespace {

bool same_devices(const Trace& a, const TaskRecord& ta, const Trace& b, const TaskRecord& tb) {
  if (ta.gpu_count != tb.gpu_count) return false;
  return std::equal(a.gpus.begin() + ta.gpu_begin, a.gpus.begin() + ta.gpu_begin + ta.gpu_count, b.gpus.begin() + tb.gpu_begin);
}

double makespan(const Trace& t) {
  double end = 0;
  for (const TaskRecord& r : t.tasks) end = std::max(end, r.end_s);
  return end;
}

}  // namespace

TraceDiff diff_traces(const Trace& predicted, const Trace& measured) {
  if (predicted.tasks.size() != measured.tasks.size()) {
    throw std::invalid_argument("the traces hold " + std::to_string(predicted.tasks.size()) + " and " +
                                std::to_string(measured.tasks.size()) + " tasks");
  }
  TraceDiff diff;
  std::vector<double> errors;
  for (std::uint32_t i = 0; i < predicted.tasks.size(); ++i) {
    const TaskRecord& p = predicted.tasks[i];
    const TaskRecord& m = measured.tasks[i];
    if (p.instance != m.instance || p.task != m.task) throw std::invalid_argument("task " + std::to_string(i) + " differs between the traces");
    if (p.status != TaskStatus::completed || m.status != TaskStatus::completed) continue;
    if (!same_devices(predicted, p, measured, m)) throw std::invalid_argument("task " + std::to_string(i) + " ran on other devices");
    TaskError e{i, p.end_s - p.start_s, m.end_s - m.start_s};
    if (!(e.measured_s > 0)) continue;  // too short for the clock to see
    diff.tasks.push_back(e);
    errors.push_back(std::abs(e.relative()));
  }
  diff.predicted_makespan_s = makespan(predicted);
  diff.measured_makespan_s = makespan(measured);
  if (!errors.empty()) {
    diff.median_abs_error = percentile(errors, 50);
    diff.p90_abs_error = percentile(errors, 90);
    diff.max_abs_error = *std::max_element(errors.begin(), errors.end());
    for (double e : errors) diff.mean_abs_error += e / static_cast<double>(errors.size());
  }
  return diff;
}

}  // namespace fleetsim
