#include "preemptive.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "counting_walk.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/workflow.hpp"

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
//
// The waiting jobs stay keyed in walk order from round to round: a waiting job's time left moves only when its
// instance's service grows (ClusterView::attained_changed) or its gang size does (an elastic task). A round keys
// the jobs that joined, and keys the whole queue afresh only where a job whose time left may have moved still
// waits (a waiting sibling of a task that gave its GPUs back; an elastic task); it sorts the running jobs and
// walks both together until every GPU is counted for. A trace of one-task jobs so costs a round what joined and
// what it allows, not the queue's length.
class Srtf final : public CountingWalk {
 public:
  explicit Srtf(double restore_s) : restore_s_(restore_s) {}

 private:
  bool preempts() const override { return true; }

  void begin_round(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    const std::span<const RunningTask> running = view.running();
    begin_walk(view, true);
    keep_waiting(view, ready);
    running_.clear();
    for (std::uint32_t j = 0; j < running.size(); ++j) {
      const RunningTask& r = running[j];
      const double job_s = index(r.task) < job_s_.size() ? job_s_[index(r.task)] : 0.0;
      running_.push_back({std::max(0.0, job_s - view.attained_now_s(r) / r.gpus), index(r.task), j});
    }
    std::sort(running_.begin(), running_.end());
    // Merged by time left, a running job first at equal times; once the walk is done every waiting job left is held back.
    auto w = waiting_.begin();
    for (std::size_t r = 0; w != waiting_.end() || r < running_.size();) {
      if (w != waiting_.end() && (r == running_.size() || w->left_s < running_[r].left_s)) {
        if (walk_done()) {
          w = waiting_.end();
          continue;
        }
        const std::optional<std::uint32_t> place = place_of(ready, w->joined);
        if (place) {
          walk_waiting(ready, *place);
          ++w;
        } else {
          w = drop(w);  // it left the queue
        }
        continue;
      }
      const Running& j = running_[r++];
      if (!keeps_gpus(running[j.ref])) out.suspend(running[j.ref].first_gpu, "a job with less time left needs its GPUs", restore_s_);
    }
  }

  // What the oracle knows of a job that starts: its predicted time, kept for the rounds it runs in. It leaves
  // the queue: its key goes.
  void placed(const ClusterView&, const ReadyTask& t, Decisions&) override {
    if (index(t.task) >= job_s_.size()) job_s_.resize(index(t.task) + 1, 0.0);
    job_s_[index(t.task)] = t.job_s;
    if (index(t.task) < key_of_.size() && key_of_[index(t.task)].joined == t.joined) drop(waiting_.find(key_of_[index(t.task)]));
  }

  struct Waiting {
    double left_s;
    std::uint64_t joined;  // ReadyTask::joined: the queue's order at equal times
    std::uint32_t task, instance;
    bool elastic;
    bool operator<(const Waiting& o) const { return left_s < o.left_s || (left_s == o.left_s && joined < o.joined); }
  };
  struct Running {
    double left_s;
    std::uint32_t task;
    std::uint32_t ref;  // into view.running()
    bool operator<(const Running& o) const { return left_s < o.left_s || (left_s == o.left_s && task < o.task); }
  };

  static Waiting key(const ClusterView& view, const ReadyTask& t) {
    return {std::max(0.0, t.job_s - view.attained_s(t.instance) / t.gpus), t.joined, index(t.task), index(t.instance), t.spec->elastic.has_value()};
  }

  // Brings waiting_ up to the queue: the jobs that joined since the last round keyed; every job keyed afresh where
  // one whose time left may have moved waits (a stale key of a task that left the queue counts: rare, and only
  // costs a round that sort); a sweep once stale keys hold half of it.
  void keep_waiting(const ClusterView& view, std::span<const ReadyTask> ready) {
    bool moved = elastic_keyed_ > 0 || waiting_.size() > 2 * ready.size() + 1024;
    for (InstanceId instance : view.attained_changed()) moved = moved || (index(instance) < keyed_of_instance_.size() && keyed_of_instance_[index(instance)] > 0);
    if (moved) {
      while (!waiting_.empty()) drop(waiting_.begin());
      last_joined_ = 0;
    }
    for (std::size_t i = joined_after(ready, last_joined_); i < ready.size(); ++i) {
      const ReadyTask& t = ready[i];
      const Waiting k = key(view, t);
      if (k.task >= key_of_.size()) key_of_.resize(k.task + 1, Waiting{});
      if (k.instance >= keyed_of_instance_.size()) keyed_of_instance_.resize(k.instance + 1, 0);
      if (key_of_[k.task].joined != 0) drop(waiting_.find(key_of_[k.task]));
      key_of_[k.task] = k;
      ++keyed_of_instance_[k.instance];
      if (k.elastic) ++elastic_keyed_;
      waiting_.insert(k);
    }
    if (!ready.empty()) last_joined_ = std::max(last_joined_, ready.back().joined);
  }

  std::set<Waiting>::iterator drop(std::set<Waiting>::iterator at) {
    if (at == waiting_.end()) return at;
    --keyed_of_instance_[at->instance];
    if (at->elastic) --elastic_keyed_;
    key_of_[at->task].joined = 0;
    return waiting_.erase(at);
  }

  double restore_s_;
  std::vector<Running> running_;
  std::set<Waiting> waiting_;                   // every waiting job keyed, in walk order (some since left: dropped when met)
  std::vector<Waiting> key_of_;                 // per task: its entry in waiting_ (joined 0: none)
  std::vector<std::uint32_t> keyed_of_instance_;  // per instance: its tasks in waiting_
  std::uint64_t elastic_keyed_ = 0;             // elastic tasks in waiting_
  std::uint64_t last_joined_ = 0;               // the last task that joined the queue keyed
  std::vector<double> job_s_;                   // per task, from when it was placed
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
