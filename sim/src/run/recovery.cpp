#include "recovery.hpp"

#include <algorithm>
#include <cmath>

#include "fleetsim/engine.hpp"

namespace fleetsim::run {

void Recovery::size_tasks(const RecordCounts& n) {
  if (!on_) return;
  grow(run_, n.tasks, n.most_tasks, 0u);
  grow(preempted_runs_, n.tasks, n.most_tasks, 0u);
  grow(progress_, n.tasks, n.most_tasks, 0.0);
  grow(full_compute_s_, n.tasks, n.most_tasks, 0.0);
  grow(resume_s_, n.tasks, n.most_tasks, 0.0);
  grow(restore_s_, n.tasks, n.most_tasks, faults_.restore_s);
  grow(rollback_s_, n.tasks, n.most_tasks, 0.0);
  grow(rolled_back_, n.tasks, n.most_tasks, std::uint8_t{0});
  grow(stopped_at_, n.tasks, n.most_tasks, kNever);
  grow(restart_pending_, n.tasks, n.most_tasks, std::uint8_t{0});
}

void Recovery::started(TaskId task, double now_s) {
  if (!on() || stopped_at_[index(task)] == kNever) return;
  recovery_s_ += now_s - stopped_at_[index(task)];
  ++recoveries_;
  stopped_at_[index(task)] = kNever;
}

double Recovery::begin_compute(TaskId task, double full_s, double restart_s, std::uint32_t gpus) {
  const std::uint32_t t = index(task);
  full_compute_s_[t] = full_s;
  if (restart_pending_[t] != 0) {
    restart_pending_[t] = 0;
    restart_gpu_s_ += restart_s * gpus;
    resume_s_[t] = restart_s;
  } else {
    resume_s_[t] = (progress_[t] > 0 ? restore_s_[t] : 0.0) + rollback_s_[t];
  }
  return resume_s_[t] + (1 - progress_[t]) * full_s;
}

double Recovery::computed_s(std::uint32_t t, double elapsed_s) const {
  return std::clamp(elapsed_s - resume_s_[t], 0.0, (1 - progress_[t]) * full_compute_s_[t]);
}

double Recovery::save(std::uint32_t t, double saved_s, double restore_s) {
  if (saved_s <= 0) return 0;
  progress_[t] = std::min(progress_[t] + saved_s / full_compute_s_[t], 1.0);
  restore_s_[t] = restore_s;
  return saved_s;
}

double Recovery::checkpoint(TaskId task, double elapsed_s) {
  const std::uint32_t t = index(task);
  if (!checkpoints() || full_compute_s_[t] <= 0) return 0;
  const double interval = faults_.checkpoint_interval_s;
  return save(t, std::floor(computed_s(t, elapsed_s) / interval) * interval, faults_.restore_s);
}

double Recovery::suspend(TaskId task, double elapsed_s, double restore_s) {
  const std::uint32_t t = index(task);
  if (full_compute_s_[t] <= 0) return 0;
  // A rollback being paid keeps what it has paid: its run's resume is the restore, then the rollback.
  const double restored_s = resume_s_[t] - rollback_s_[t];
  rollback_s_[t] -= std::clamp(elapsed_s - restored_s, 0.0, rollback_s_[t]);
  return save(t, computed_s(t, elapsed_s), restore_s);
}

Recovery::RolledBack Recovery::roll_back(TaskId task, double rollback_s) {
  const std::uint32_t t = index(task);
  const RolledBack out{.saved_lost_s = progress_[t] * full_compute_s_[t], .first = rolled_back_[t] == 0};
  progress_[t] = 0;
  rollback_s_[t] = rollback_s;
  rolled_back_[t] = 1;
  return out;
}

std::optional<double> Recovery::stopped(TaskId task, double now_s, bool preempted, double lost_gpu_s) {
  const std::uint32_t t = index(task);
  if (preempted) {
    ++tasks_preempted_;
    ++preempted_runs_[t];
  } else {
    ++tasks_stopped_;
  }
  lost_gpu_s_ += lost_gpu_s;
  ++run_[t];
  restart_pending_[t] = 0;
  stopped_at_[t] = now_s;
  if (preempted) return now_s;
  if (run_[t] - preempted_runs_[t] < static_cast<std::uint32_t>(faults_.max_attempts)) {
    ++retries_;
    return now_s + faults_.backoff_s;
  }
  return std::nullopt;
}

std::string Recovery::attempts(TaskId task) const {
  return "(run " + std::to_string(run_[index(task)] - preempted_runs_[index(task)]) + " of " +
         std::to_string(faults_.max_attempts) + ")";
}

void Recovery::resized(TaskId task, double elapsed_s) {
  const std::uint32_t t = index(task);
  const double computed_s = elapsed_s - resume_s_[t];
  if (computed_s > 0 && full_compute_s_[t] > 0) progress_[t] = std::min(1.0, progress_[t] + computed_s / full_compute_s_[t]);
  ++run_[t];
  ++preempted_runs_[t];
  restart_pending_[t] = 1;
}

void Recovery::summarize(Summary& summary) const {
  summary.tasks_stopped = tasks_stopped_;
  summary.tasks_preempted = tasks_preempted_;
  summary.restart_gpu_s = restart_gpu_s_;
  summary.retries = retries_;
  summary.lost_gpu_s = lost_gpu_s_;
  // Busy GPU time includes the stopped runs': goodput is the share whose work was kept.
  summary.goodput = summary.gpu_busy_s > 0 ? std::max(0.0, summary.gpu_busy_s - lost_gpu_s_) / summary.gpu_busy_s : 1;
  summary.mean_recovery_s = recoveries_ > 0 ? recovery_s_ / static_cast<double>(recoveries_) : 0;
}

}  // namespace fleetsim::run
