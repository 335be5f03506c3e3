// The round shape of the preemptive trace-paper policies (Tiresias, Gandiva's time slicing, SRTF):
// walk the running and the waiting jobs together in the policy's order, counting GPUs (Tiresias'
// "count" scheme). The jobs that fit in the cluster's GPUs should run: a running job that does not
// fit is suspended (its work kept), a waiting one that fits is allowed to be placed, and the greedy
// loop places the allowed ones as GPUs free up, usually in the round right after the suspensions.
#pragma once

#include <string>
#include <vector>

#include "greedy.hpp"

namespace fleetsim::policies {

class CountingWalk : public Greedy {
 protected:
  bool idle_when_full() const override { return false; }  // the order moves between rounds

  // Starts a round's walk over the GPUs free now, plus (when running jobs may be suspended) those
  // the running jobs hold.
  void begin_walk(const ClusterView& view, bool suspending) {
    ++walk_;
    held_back_ = false;
    budget_ = view.free_gpu_count();
    if (suspending) {
      for (const RunningTask& r : view.running()) budget_ += r.gpus;
    }
  }
  // A running job keeps its GPUs if they fit in what is left, else it is suspended.
  void walk_running(const RunningTask& r, Decisions& out, const std::string& reason, double restore_s) {
    if (r.gpus <= budget_) {
      budget_ -= r.gpus;
    } else {
      out.suspend(r.first_gpu, reason, restore_s);
    }
  }
  // A waiting job is allowed if its GPUs fit in what is left, else it is held back.
  void walk_waiting(const ReadyTask& t) {
    if (t.gpus <= budget_) {
      budget_ -= t.gpus;
      if (index(t.task) >= allowed_walk_.size()) allowed_walk_.resize(index(t.task) + 1, 0);
      allowed_walk_[index(t.task)] = walk_;
    } else {
      held_back_ = true;
    }
  }
  bool allowed(const ClusterView&, const ReadyTask& t) override { return is_allowed(t); }
  bool is_allowed(const ReadyTask& t) const { return index(t.task) < allowed_walk_.size() && allowed_walk_[index(t.task)] == walk_; }
  // Whether every GPU is counted for: every job left in the walk is held back or suspended.
  bool walk_full() const { return budget_ == 0; }
  // Whether this round's walk held a waiting job back (then the policy asks to be woken when its order moves).
  bool held_back() const { return held_back_; }

 private:
  std::uint64_t walk_ = 0;
  std::uint32_t budget_ = 0;
  bool held_back_ = false;
  std::vector<std::uint64_t> allowed_walk_;  // per task: == walk_ when this round's walk allowed it
};

}  // namespace fleetsim::policies
