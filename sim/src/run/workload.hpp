// The workload: arrival streams drawn one arrival at a time (open loops) or as users come back
// (closed loops); each instance's records (its own and its tasks') are made in the trace when it
// arrives, and the workload knows which instances are still in flight.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fleetsim/engine.hpp"
#include "fleetsim/ids.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim::run {

// One open-loop stream's arrivals, drawn one at a time, in time order (a list of times in its sorted
// order, ties in the order written), bounded by its count and the horizon. Closed loops draw none:
// their arrivals follow completions.
class ArrivalDraws {
 public:
  struct Arrival {
    double time_s = 0;
    double scale = 1;  // this arrival's work over the workflow's (trace replay)
  };
  ArrivalDraws(const ArrivalSpec& arrival, double horizon_s, Rng rng);
  std::optional<Arrival> next();

 private:
  bool more(double t) const { return t <= horizon_s_ && (a_->count < 0 || drawn_ < a_->count); }

  const ArrivalSpec* a_;
  double horizon_s_;
  Rng rng_;
  std::int64_t drawn_ = 0;
  std::vector<std::uint32_t> order_;  // a list of times not written in order: its sorted order
  // Where the draw is: the next candidate time; bursty periods' end, rate and on/off.
  double t_ = 0, end_s_ = 0, next_s_ = 0;
  bool started_ = false, in_period_ = false, on_ = true, done_ = false;
};

class Workload {
 public:
  // Counts every stream's arrivals (a draw that keeps nothing) to size the run's tables once and to
  // know the job-size distribution; makes no records yet. `job_gpu_s` is each workflow's predicted
  // GPU-seconds (for the job-size distribution size-based policies rank by).
  Workload(const Scenario& scenario, std::uint64_t seed, const std::vector<double>& job_gpu_s, EventQueue& queue,
           Trace& trace);

  // The first open-loop arrival; then, separately, each closed-loop user's first workflow at its
  // stream's start (kept apart so that events keep their order among the other sources' first ones).
  void start_open_loops();
  void start_closed_loops();

  // kArrival (`subject`: an open-loop arrival's place in time order, or a closed-loop user's workflow
  // after them): the instance arrives now; its records are made (`made(instance)`: per-task tables grow),
  // its root tasks are made ready, and the next open-loop arrival is scheduled.
  template <typename Made, typename MakeReady>
  void arrive(std::uint32_t subject, Made made, MakeReady make_ready) {
    const std::uint32_t instance = admit(subject);
    made(instance);
    ++in_flight_;
    const Workflow& wf = sc_.workflows[trace_.instance(instance).workflow];
    for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) {
      if (wf.inputs(t).empty()) make_ready(task_id(instance, t));
    }
    if (subject < open_arrivals_) schedule_open(subject + 1);
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
  std::uint64_t unfinished() const { return unfinished_; }  // not yet ended (arrived or to come)
  // The most instances and tasks the run can make: every open-loop arrival and every closed-loop
  // user's workflows (those the horizon cuts off included).
  std::uint64_t most_instances() const { return most_instances_; }
  std::uint64_t most_tasks() const { return most_tasks_; }

 private:
  static constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
  struct ClosedStream {
    std::uint32_t stream = 0;
    std::uint32_t first_slot = 0;  // its users' workflows are subjects [first_slot, first_slot + users * count)
  };

  std::uint32_t admit(std::uint32_t subject);  // makes the arriving instance's records; returns it
  void schedule_open(std::uint32_t subject);
  const ClosedStream& closed_stream(std::uint32_t slot) const;
  struct Later {  // the heap's order: stream x's drawn arrival comes after y's
    const std::vector<ArrivalDraws::Arrival>* next;
    bool operator()(std::uint32_t x, std::uint32_t y) const;
  };

  const Scenario& sc_;
  EventQueue& queue_;
  Trace& trace_;
  std::vector<ArrivalDraws> draws_;          // per stream (closed loops: none drawn)
  std::vector<std::uint32_t> heap_;          // open streams with an arrival drawn, earliest (then lowest stream) first
  std::vector<ArrivalDraws::Arrival> next_;  // per stream: its arrival drawn and not yet come
  std::uint32_t open_arrivals_ = 0;          // subjects [0, this) arrive at drawn times, in order
  std::vector<ClosedStream> closed_;
  std::vector<std::uint32_t> slot_of_;       // per instance: its closed-loop subject (empty: no closed loop)
  std::vector<double> scale_;                // per instance: known work scale (empty: all 1)
  std::vector<std::uint32_t> first_task_;    // per instance: its first task's id
  std::vector<std::uint32_t> remaining_;     // per instance: tasks not yet ended
  std::vector<Rng> think_rngs_;              // per stream: closed-loop think times
  Rng task_sizes_;                           // drawn task sizes, in the order instances arrive
  bool scaled_ = false;                      // some stream replays a trace (declared work scales)
  std::vector<double> job_sizes_;
  std::uint64_t in_flight_ = 0;
  std::uint64_t unfinished_ = 0;
  std::uint64_t most_instances_ = 0, most_tasks_ = 0;
};

}  // namespace fleetsim::run
