#include "preemptive.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "counting_walk.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim::policies {
namespace {

// Round robin over slices of `quantum` seconds. A job that starts (or resumes) runs its first slice
// unchallenged. After that it queues again at the end of each slice it completes, as if it had just
// joined, behind every job already waiting: the walk takes running jobs in their first slice, then
// the rest (waiting jobs in the order they became ready, running ones by the end of their last whole
// slice). With no job waiting nothing is suspended, so a lone job runs on uninterrupted. The first waiting
// job too large for the GPUs counted so far holds its turn (CountingWalk's reserving mode): the waiting
// jobs behind it wait until it fits, at most a quantum later, when the first slices ahead of it have ended.
// A slice is time that moves the job forward: the restore a resumed job pays first is not in it (its slices
// count from started_s + resume_s), or a restore as long as the quantum would end every slice before the job
// computed anything, and jobs would take turns forever.
class TimeSlice final : public CountingWalk {
 public:
  TimeSlice(double quantum_s, double restore_s)
      : CountingWalk(true),
        quantum_s_(quantum_s),
        restore_s_(restore_s),
        reason_("its " + format_quantity(quantum_s, Dimension::time) + " time slice ended and waiting jobs take its GPUs") {}

 private:
  bool preempts() const override { return true; }

  // Whole slices a job whose slices count from `from_s` has completed by `now` (a hair of tolerance, so a
  // wake-up at a slice's end finds it ended despite rounding).
  double slices_done(double from_s, double now) const {
    const double ran = now - from_s;
    return std::floor((ran + 1e-9 * std::max(1.0, std::abs(ran))) / quantum_s_);
  }

  void begin_round(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    const std::span<const RunningTask> running = view.running();
    // Jobs in their first slice come first in the walk, so they keep their GPUs: the walk counts
    // only the free GPUs and those of the jobs past their first slice, which queue again.
    begin_walk(view, false);
    queued_.clear();
    const auto walk_running = [&](const RunningTask& r) {
      if (!keeps_gpus(r)) out.suspend(r.first_gpu, reason_, restore_s_);
    };
    // Most running jobs are well inside their first slice: a comparison tells (slices_done decides
    // for the others and for those near the end of their first slice).
    const double first_slice_from = view.now() - quantum_s_ + 1e-6 * std::max(1.0, quantum_s_);
    double first_started = std::numeric_limits<double>::infinity();  // of the jobs in their first slice
    double next_slice_end = std::numeric_limits<double>::infinity();  // of the others
    for (std::uint32_t j = 0; j < running.size(); ++j) {
      const RunningTask& r = running[j];
      const double from = r.started_s + r.resume_s;  // its slices' origin: the restore is not in them
      if (from > first_slice_from) {
        first_started = std::min(first_started, from);
        continue;
      }
      const double done = slices_done(from, view.now());
      next_slice_end = std::min(next_slice_end, from + (done + 1) * quantum_s_);
      if (done == 0) continue;
      queued_.push_back({from + done * quantum_s_, index(r.task), j});
      count_in(r);
    }
    next_slice_end = std::min(next_slice_end, first_started + quantum_s_);
    std::sort(queued_.begin(), queued_.end());
    // The rest merged by when each queued; at equal times a running job goes first (no suspension
    // for a tie). Once the walk of waiting jobs is done, the waiting jobs after it are held back too
    // and the running ones keep only what is left uncounted: a long queue costs nothing more.
    std::uint32_t i = 0;
    for (const Queued& q : queued_) {
      if (!walk_done()) i = walk_waiting_from(ready, i, q.at_s);
      walk_running(running[q.ref]);
    }
    if (!walk_done()) walk_waiting_from(ready, i);
    // While a job waits, the next round is due when a running job's slice ends.
    if (held_back()) out.wake_at(next_slice_end);
  }

  // A job that starts while others wait: a round is due at the end of its first slice.
  void placed(const ClusterView& view, const ReadyTask&, Decisions& out) override {
    if (held_back()) out.wake_at(view.now() + quantum_s_);
  }

  struct Queued {
    double at_s;  // the end of its last whole slice
    std::uint32_t task;
    std::uint32_t ref;  // into view.running()
    bool operator<(const Queued& o) const { return at_s < o.at_s || (at_s == o.at_s && task < o.task); }
  };
  double quantum_s_;
  double restore_s_;
  std::string reason_;
  std::vector<Queued> queued_;
};

// Shortest remaining time first, preemptive, with the oracle's knowledge of each job's time: the walk
// takes running and waiting jobs by predicted time left (the instance's predicted compute time, the
// trace's duration for a job log, less the seconds it has received), running ones first at equal
// times. A running job's time left only shrinks, so the order moves only when jobs arrive or end,
// which start rounds anyway: no wake-ups are needed.
class Srtf final : public CountingWalk {
 public:
  explicit Srtf(double restore_s) : restore_s_(restore_s) {}

 private:
  bool preempts() const override { return true; }

  void begin_round(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    const std::span<const RunningTask> running = view.running();
    begin_walk(view, true);
    jobs_.clear();
    for (std::uint32_t j = 0; j < running.size(); ++j) {
      const RunningTask& r = running[j];
      const double job_s = index(r.task) < job_s_.size() ? job_s_[index(r.task)] : 0.0;
      jobs_.push_back({std::max(0.0, job_s - view.attained_now_s(r) / r.gpus), false, index(r.task), j});
    }
    for (std::uint32_t i = 0; i < ready.size(); ++i) {
      const ReadyTask& t = ready[i];
      jobs_.push_back({std::max(0.0, t.job_s - view.attained_s(t.instance) / t.gpus), true, i, i});
    }
    std::sort(jobs_.begin(), jobs_.end());
    for (const Job& j : jobs_) {
      if (j.waiting) {
        walk_waiting(ready, j.ref);
      } else if (!keeps_gpus(running[j.ref])) {
        out.suspend(running[j.ref].first_gpu, "a job with less time left needs its GPUs", restore_s_);
      }
    }
  }

  // What the oracle knows of a job that starts: its predicted time, kept for the rounds it runs in.
  void placed(const ClusterView&, const ReadyTask& t, Decisions&) override {
    if (index(t.task) >= job_s_.size()) job_s_.resize(index(t.task) + 1, 0.0);
    job_s_[index(t.task)] = t.job_s;
  }

  struct Job {
    double left_s;
    bool waiting;
    std::uint32_t order;  // running: task number; waiting: ready order
    std::uint32_t ref;    // into view.running() or ready
    bool operator<(const Job& o) const {
      if (left_s != o.left_s) return left_s < o.left_s;
      if (waiting != o.waiting) return !waiting;
      return order < o.order;
    }
  };
  double restore_s_;
  std::vector<Job> jobs_;
  std::vector<double> job_s_;  // per task, from when it was placed
};

}  // namespace

std::unique_ptr<Policy> make_time_slice(const PolicyParams& p) {
  // A slice is a job's turn on its GPUs, suspended and resumed after it: shorter than a second it would switch
  // jobs faster than one is suspended (and a nanosecond's slices are an event storm).
  const double quantum = p.number("quantum");
  if (!(quantum >= 1) || !(quantum <= kLongestSeconds)) {
    throw InputError({Problem{"", "quantum", "expected a number of seconds from 1 to 1e9, found " + format_quantity(quantum, Dimension::time)}});
  }
  return std::make_unique<TimeSlice>(quantum, p.non_negative("restore"));
}

std::unique_ptr<Policy> make_srtf(const PolicyParams& p) { return std::make_unique<Srtf>(p.non_negative("restore")); }

}  // namespace fleetsim::policies
