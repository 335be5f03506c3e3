// Predicted against measured: two traces of the same tasks on the same devices (a plan and its
// real run), compared task by task and as a whole.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fleetsim/trace.hpp"

namespace fleetsim {

struct TaskError {
  std::uint32_t record = 0;  // into both traces' tasks
  double predicted_s = 0;    // placed to ended
  double measured_s = 0;     // with several runs, the median over them
  double relative() const { return (predicted_s - measured_s) / measured_s; }
};

struct TraceDiff {
  std::vector<TaskError> tasks;  // completed in both
  double predicted_makespan_s = 0, measured_makespan_s = 0;
  // Over tasks, of |predicted - measured| / measured.
  double median_abs_error = 0, p90_abs_error = 0, max_abs_error = 0, mean_abs_error = 0;
  // Several measured runs of one plan: their count, and the noise floor no model can go below: over
  // tasks, the median of each task's median |run - median| / median; and the same of the makespan.
  std::size_t runs = 1;
  double task_noise = 0, makespan_noise = 0;
  double makespan_error() const { return (predicted_makespan_s - measured_makespan_s) / measured_makespan_s; }
};

// Throws std::invalid_argument when the traces do not hold the same tasks on the same devices.
TraceDiff diff_traces(const Trace& predicted, const Trace& measured);
// Against several measured runs of the same plan: each task's and the makespan's median over the runs.
TraceDiff diff_traces(const Trace& predicted, std::span<const Trace> measured);

}  // namespace fleetsim
