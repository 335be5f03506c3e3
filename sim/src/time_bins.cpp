#include "fleetsim/time_bins.hpp"

#include "fleetsim/trace.hpp"

namespace fleetsim {

TimeBins waiting_tasks(const Trace& trace, double end_s, std::size_t bins) {
  TimeBins waiting(end_s, bins);
  for (const TaskRecord& t : trace.tasks) {
    if (t.ready_s == kNever) continue;
    waiting.add(t.ready_s, t.start_s != kNever ? t.start_s : end_s, 1);
  }
  return waiting;
}

}  // namespace fleetsim
