// Predicted against measured: two traces of the same tasks on the same devices (a plan and its
// real run), compared task by task and as a whole.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetsim/trace.hpp"

namespace fleetsim {

struct TaskError {
  std::uint32_t record = 0;  // into both traces' tasks
  double predicted_s = 0;    // placed to ended
  double measured_s = 0;
  double relative() const { return (predicted_s - measured_s) / measured_s; }
};

struct TraceDiff {
  std::vector<TaskError> tasks;  // completed in both
  double predicted_makespan_s = 0, measured_makespan_s = 0;
  // Over tasks, of |predicted - measured| / measured.
  double median_abs_error = 0, p90_abs_error = 0, max_abs_error = 0, mean_abs_error = 0;
  double makespan_error() const { return (predicted_makespan_s - measured_makespan_s) / measured_makespan_s; }
};

// Throws std::invalid_argument when the traces do not hold the same tasks on the same devices.
TraceDiff diff_traces(const Trace& predicted, const Trace& measured);

}  // namespace fleetsim
