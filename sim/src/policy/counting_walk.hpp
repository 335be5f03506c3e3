// The round shape of the preemptive trace-paper policies (Tiresias, Gandiva's time slicing, SRTF):
// walk the running and the waiting jobs together in the policy's order, counting GPUs (Tiresias'
// "count" scheme). The jobs that fit in the cluster's GPUs should run: a running job that does not
// fit is suspended (its work kept), a waiting one that fits is allowed to be placed, and the greedy
// loop places the allowed ones as GPUs free up, usually in the round right after the suspensions.
//
// When the tenants' allowed nodes split the cluster into parts no tenant crosses (virtual clusters:
// tenants pinned to nodes of their own), each part is counted apart, so a job waits for, and
// suspends jobs in, only the part it may run in. Otherwise the whole cluster is one count.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "greedy.hpp"

namespace fleetsim::policies {

class CountingWalk : public Greedy {
 protected:
  // reserving: the first waiting job held back in a part reserves it: no waiting job behind it is
  // allowed, so the GPUs left uncounted stay with the running jobs behind it until enough are counted
  // for it to start (a round robin's turn; without it, small jobs behind a gang take every GPU a slice
  // end frees and the gang can wait for as long as they keep coming). A job larger than the GPUs up in
  // its part (free or running a job), or than its tenant's nodes hold, reserves nothing.
  explicit CountingWalk(bool reserving = false) : reserving_(reserving) {}

  bool idle_when_full() const override { return false; }  // the order moves between rounds

  // Starts a round's walk over the GPUs free now, plus (when running jobs may be suspended) those
  // the running jobs hold.
  void begin_walk(const ClusterView& view, bool suspending);
  // Counts a running job's GPUs in, as begin_walk does for every running job when suspending: for a
  // policy that walks only some of its running jobs (the others keep their GPUs, uncounted).
  void count_in(const RunningTask& r) {
    const std::uint32_t part = budget_.size() == 1 ? 0 : part_of(r);
    if (budget_[part] == 0 && r.gpus > 0) ++open_parts_;
    budget_[part] += r.gpus;
  }
  // A running job keeps its GPUs if they fit in what is left of its part; false: the policy suspends it
  // (the reason is built only then).
  bool keeps_gpus(const RunningTask& r) {
    const std::uint32_t part = budget_.size() == 1 ? 0 : part_of(r);
    if (r.gpus > budget_[part]) return false;
    take(part, r.gpus);
    return true;
  }
  // A waiting job (ready[i]) is allowed if its GPUs fit in what is left of its part, else it is held
  // back (inline: long queues of jobs too large for what is left are walked past one by one).
  void walk_waiting(std::span<const ReadyTask> ready, std::uint32_t i) {
    const ReadyTask& t = ready[i];
    const std::uint32_t part = budget_.size() == 1 ? 0 : tenant_part_[index(t.tenant)];
    if (reserved_[part] == 0 && t.gpus <= budget_[part]) {
      allow(part, t, i);
    } else {
      hold(part, t);
    }
  }
  // walk_waiting for ready[from], ready[from + 1]... that became ready before `before_s`, until the walk
  // is done; returns the index of the first job not walked.
  std::uint32_t walk_waiting_from(std::span<const ReadyTask> ready, std::uint32_t from,
                                  double before_s = std::numeric_limits<double>::infinity());
  bool allowed(const ClusterView&, const ReadyTask& t) override { return is_allowed(t); }
  // The greedy loop places the allowed jobs only, in walk order.
  bool narrow(std::vector<std::uint32_t>& order) override {
    order.assign(allowed_order_.begin(), allowed_order_.end());
    return true;
  }
  bool is_allowed(const ReadyTask& t) const { return index(t.task) < allowed_walk_.size() && allowed_walk_[index(t.task)] == walk_; }
  // Whether the walk of waiting jobs is done: no part can allow one more (every GPU is counted for, or
  // the part is reserved) and a job was held back, so every waiting job left is held back too.
  bool walk_done() const { return open_parts_ == 0 && held_back_; }
  // Whether this round's walk held a waiting job back (then the policy asks to be woken when its order moves).
  bool held_back() const { return held_back_; }

 private:
  void find_parts(const ClusterView& view);
  void allow(std::uint32_t part, const ReadyTask& t, std::uint32_t i);
  void hold(std::uint32_t part, const ReadyTask& t) {
    held_back_ = true;
    if (reserving_ && reserved_[part] == 0 && t.gpus <= up_[part] && t.gpus <= tenant_gpus_[index(t.tenant)]) {
      reserved_[part] = 1;
      if (budget_[part] > 0) --open_parts_;  // closed to waiting jobs
    }
  }
  void take(std::uint32_t part, std::uint32_t gpus) {
    budget_[part] -= gpus;
    if (budget_[part] == 0 && gpus > 0 && reserved_[part] == 0) --open_parts_;
  }
  std::uint32_t part_of(const RunningTask& r) const;  // of a cluster split into parts

  bool reserving_;
  const Cluster* cluster_ = nullptr;
  std::vector<std::uint32_t> node_part_;    // per node
  std::vector<std::uint32_t> tenant_part_;  // per tenant
  std::vector<std::uint32_t> budget_;       // per part: GPUs not yet counted for in this walk
  std::vector<std::uint32_t> up_;           // reserving, per part: GPUs free or running a job at the walk's start
  std::vector<std::uint8_t> reserved_;      // per part: a held-back job reserved it in this walk
  std::vector<std::uint32_t> tenant_gpus_;  // reserving, per tenant: GPUs of the nodes it may use
  std::uint32_t open_parts_ = 0;            // parts with budget left, not reserved
  std::uint64_t walk_ = 0;
  bool held_back_ = false;
  std::vector<std::uint64_t> allowed_walk_;  // per task: == walk_ when this round's walk allowed it
  std::vector<std::uint32_t> allowed_order_;  // this round's allowed jobs, as indices into ready, in walk order
};

}  // namespace fleetsim::policies
