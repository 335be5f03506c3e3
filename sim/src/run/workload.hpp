// The workload: arrival streams drawn into instances up front (open loops) or as users come back
// (closed loops), each instance's tasks in the trace, and which instances are still in flight.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetsim/engine.hpp"
#include "fleetsim/ids.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim::run {

// Arrival times of one stream, bounded by its count and the horizon (closed loops: none; their
// arrivals follow completions).
std::vector<double> arrival_times(const ArrivalSpec& arrival, double horizon_s, Rng& rng);

class Workload {
 public:
  // Draws every arrival and appends each instance, with its tasks, to `trace`. `job_gpu_s` is each
  // workflow's predicted GPU-seconds (for the job-size distribution size-based policies rank by).
  Workload(const Scenario& scenario, std::uint64_t seed, const std::vector<double>& job_gpu_s, EventQueue& queue,
           Trace& trace);

  // The first open-loop arrival; then, separately, each closed-loop user's first workflow at its
  // stream's start (kept apart so that events keep their order among the other sources' first ones).
  void start_open_loops();
  void start_closed_loops();

  // kArrival: the instance arrives now (closed-loop instances learn their arrival time here), its root
  // tasks are made ready, and the next open-loop instance is scheduled.
  template <typename MakeReady>
  void arrive(std::uint32_t instance, MakeReady make_ready) {
    trace_.instances[instance].arrival_s = queue_.now();
    ++in_flight_;
    const Workflow& wf = sc_.workflows[trace_.instances[instance].workflow];
    for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) {
      if (wf.inputs(t).empty()) make_ready(task_id(instance, t));
    }
    schedule_after(instance);
  }
  // One task of the instance has ended (completed or failed); the last one ends the instance, and a
  // closed-loop user thinks, then submits its next workflow.
  bool task_ended(std::uint32_t instance);  // true when it ended the instance

  TaskId task_id(std::uint32_t instance, std::uint32_t local) const { return make_id<TaskId>(first_task_[instance] + local); }
  // The part of an instance's work declared in advance (a trace job's scale; 1 otherwise).
  double known_scale(InstanceId instance) const { return scale_.empty() ? 1.0 : scale_[index(instance)]; }
  // Sorted quantiles (at most 512) of open-loop instances' predicted GPU-seconds.
  const std::vector<double>& job_sizes() const { return job_sizes_; }
  std::uint64_t in_flight() const { return in_flight_; }    // arrived and not ended
  std::uint64_t unfinished() const { return unfinished_; }  // not yet ended

 private:
  static constexpr std::uint32_t kNoInstance = 0xFFFFFFFFu;

  void schedule_after(std::uint32_t instance);

  const Scenario& sc_;
  EventQueue& queue_;
  Trace& trace_;
  std::uint32_t open_instances_ = 0;         // instances [0, this) arrive at drawn times, in order
  std::vector<std::uint32_t> next_in_loop_;  // per instance: a closed-loop user's next one (empty: no closed loop)
  std::vector<std::uint32_t> stream_of_;     // per instance
  std::vector<double> scale_;                // per instance: known work scale (empty: all 1)
  std::vector<std::uint32_t> first_task_;    // per instance: its first task's id
  std::vector<std::uint32_t> remaining_;     // per instance: tasks not yet ended
  std::vector<Rng> think_rngs_;              // per stream: closed-loop think times
  std::vector<double> job_sizes_;
  std::uint64_t in_flight_ = 0;
  std::uint64_t unfinished_ = 0;
};

}  // namespace fleetsim::run
