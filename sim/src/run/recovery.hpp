// The runs of a task that failures, preemptions and elastic resizes stop. Each stop ends a run: a
// failure's counts against the retry attempts, a preemption's or a resize's does not. Whole checkpoint
// intervals of a run's compute are kept; the next run pays a restore (or, after a resize, the task's
// restart) and computes what is left. Also keeps the summary's recovery figures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/ids.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "slots.hpp"

namespace fleetsim::run {

class Recovery {
 public:
  // Keeps per-task state only where runs may be stopped (`restartable`).
  Recovery(const FaultSpec& faults, bool restartable) : faults_(faults), on_(restartable) {}  // faults kept by reference
  void size_tasks(const RecordCounts& n);
  bool on() const { return on_; }
  bool checkpoints() const { return faults_.checkpoint_interval_s > 0; }

  // The task's current run (0 for its first): a stop ends it.
  std::uint32_t run(TaskId task) const { return run_[index(task)]; }

  // The task is placed again: the time since it was stopped was spent recovering.
  void started(TaskId task, double now_s);
  // The task begins computing; `full_s` is its compute from scratch on its gang of `gpus`. Returns what it
  // computes: the restore or restart it pays first, then the share not saved by checkpoints.
  double begin_compute(TaskId task, double full_s, double restart_s, std::uint32_t gpus);
  // The restore or restart the task's current run pays before computing (set by begin_compute).
  double resume_s(TaskId task) const { return on_ ? resume_s_[index(task)] : 0.0; }
  // A batch member computes `full_s` (batches are not resumed from checkpoints).
  void set_full_compute(TaskId task, double full_s) { full_compute_s_[index(task)] = full_s; }

  // The task is stopped `elapsed_s` after its compute began: the whole checkpoint intervals of what it
  // computed are saved. Returns the compute seconds saved.
  double checkpoint(TaskId task, double elapsed_s);
  // A training iteration whose job keeps its own checkpoint is stopped: its next run first pays `rollback_s`
  // (reading the checkpoint back, and computing again the iterations done since it was saved), and computes
  // the iteration from its start (what a suspension had saved of it is lost with the rest). Returns the
  // compute seconds so lost, and whether this is the task's first rollback (the iterations it loses were
  // counted lost then; a later one only repeats their recomputation, which its run's time holds).
  struct RolledBack {
    double saved_lost_s = 0;
    bool first = true;
  };
  RolledBack roll_back(TaskId task, double rollback_s);
  // The task is suspended `elapsed_s` after its compute began: all it computed is saved, and its next
  // run pays `restore_s` first. Returns the compute seconds saved.
  double suspend(TaskId task, double elapsed_s, double restore_s);
  // The task is stopped; `lost_gpu_s` of its GPU time bought nothing. When it runs again: at once after a
  // preemption, after the backoff while a failed task has attempts left; nothing when it has none.
  std::optional<double> stopped(TaskId task, double now_s, bool preempted, double lost_gpu_s);
  // "(run 3 of 3)": which attempt a failure ended.
  std::string attempts(TaskId task) const;
  // An elastic resize ends the run `elapsed_s` after its compute began; the next pays the task's restart.
  void resized(TaskId task, double elapsed_s);
  // The task's next compute first pays its restart (an elastic training iteration placed on other GPUs than
  // the iteration before it ran on).
  void restart_next(TaskId task) {
    if (on_) restart_pending_[index(task)] = 1;
  }
  bool restart_pending(TaskId task) const { return on_ && restart_pending_[index(task)] != 0; }

  // Tasks stopped, preempted, retries, lost and restart GPU time, goodput (of summary.gpu_busy_s), recovery time.
  void summarize(Summary& summary) const;

 private:
  // What the task's current run computed `elapsed_s` after its compute began, up to what it had left.
  double computed_s(std::uint32_t t, double elapsed_s) const;
  // Adds `saved_s` of compute to the task's saved progress; resuming from it costs `restore_s`.
  double save(std::uint32_t t, double saved_s, double restore_s);

  const FaultSpec& faults_;
  bool on_;
  std::vector<std::uint32_t> run_;             // per task: runs stopped, so the current run's number
  std::vector<std::uint32_t> preempted_runs_;  // per task: runs a preemption or a resize ended (not attempts)
  std::vector<double> progress_;               // per task: share of its compute saved by checkpoints
  std::vector<double> full_compute_s_;         // per task: this run's compute time from scratch
  std::vector<double> resume_s_;               // per task: restore or restart its run paid before computing
  std::vector<double> restore_s_;              // per task: what restoring its saved progress costs
  std::vector<double> rollback_s_;             // per task: what a training job's rollback to its checkpoint costs its next run, still unpaid
  std::vector<std::uint8_t> rolled_back_;      // per task: rolled back before
  std::vector<double> stopped_at_;             // per task: when it was stopped, until it starts again
  std::vector<std::uint8_t> restart_pending_;  // per task: resized, its restart not yet paid
  std::uint64_t tasks_stopped_ = 0, tasks_preempted_ = 0, retries_ = 0, recoveries_ = 0;
  double lost_gpu_s_ = 0, recovery_s_ = 0, restart_gpu_s_ = 0;
};

}  // namespace fleetsim::run
