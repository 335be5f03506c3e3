#include "fleetsim/trace_diff.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

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

TraceDiff diff_traces(const Trace& predicted, const Trace& measured) { return diff_traces(predicted, std::span(&measured, 1)); }

TraceDiff diff_traces(const Trace& predicted, std::span<const Trace> measured) {
  if (measured.empty()) throw std::invalid_argument("no measured run to compare with");
  for (const Trace& run : measured) {
    if (predicted.tasks.size() != run.tasks.size()) {
      throw std::invalid_argument("the traces hold " + std::to_string(predicted.tasks.size()) + " and " + std::to_string(run.tasks.size()) +
                                  " tasks");
    }
  }
  // The median of `values` and the median of their relative deviations from it.
  const auto median_and_spread = [](std::vector<double> values) {
    const double median = percentile(values, 50);
    for (double& v : values) v = median > 0 ? std::abs(v - median) / median : 0;
    return std::pair{median, percentile(values, 50)};
  };
  TraceDiff diff;
  diff.runs = measured.size();
  std::vector<double> errors, noise, durations;
  for (std::uint32_t i = 0; i < predicted.tasks.size(); ++i) {
    const TaskRecord& p = predicted.tasks[i];
    durations.clear();
    for (const Trace& run : measured) {
      const TaskRecord& m = run.tasks[i];
      if (p.instance != m.instance || p.task != m.task) throw std::invalid_argument("task " + std::to_string(i) + " differs between the traces");
      if (p.status != TaskStatus::completed || m.status != TaskStatus::completed) break;
      if (!same_devices(predicted, p, run, m)) throw std::invalid_argument("task " + std::to_string(i) + " ran on other devices");
      durations.push_back(m.end_s - m.start_s);
    }
    if (durations.size() != measured.size()) continue;  // not completed everywhere
    const auto [median_s, spread] = median_and_spread(durations);
    TaskError e{i, p.end_s - p.start_s, median_s};
    if (!(e.measured_s > 0)) continue;  // too short for the clock to see
    diff.tasks.push_back(e);
    errors.push_back(std::abs(e.relative()));
    noise.push_back(spread);
  }
  diff.predicted_makespan_s = makespan(predicted);
  std::vector<double> makespans;
  for (const Trace& run : measured) makespans.push_back(makespan(run));
  std::tie(diff.measured_makespan_s, diff.makespan_noise) = median_and_spread(makespans);
  if (!errors.empty()) {
    diff.median_abs_error = percentile(errors, 50);
    diff.p90_abs_error = percentile(errors, 90);
    diff.max_abs_error = *std::max_element(errors.begin(), errors.end());
    for (double e : errors) diff.mean_abs_error += e / static_cast<double>(errors.size());
    diff.task_noise = percentile(noise, 50);
  }
  return diff;
}

}  // namespace fleetsim
