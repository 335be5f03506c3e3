// Time-sliced GPUs: the tasks computing on one GPU take turns (processor sharing). With n of them,
// each advances at 1 / (n (1 + f (n - 1))) of its solo speed, where f, the GPU's interference, is the
// share of throughput each extra context costs (context switches, cache and TLB misses). A gang
// advances at the pace of its slowest GPU. Work is counted in solo seconds: what it takes alone.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "fleetsim/ids.hpp"
#include "paced_work.hpp"

namespace fleetsim {

class SharedCompute {
 public:
  static constexpr double kExclusive = -1;  // a GPU that runs one task at a time
  // Per GPU: its interference factor, or kExclusive.
  explicit SharedCompute(std::vector<double> interference);

  bool any() const { return any_; }
  bool shared(GpuId gpu) const { return interference_[index(gpu)] >= 0; }
  // The task starts `work_s` solo seconds of compute on these GPUs (all time-sliced). `changed` gets
  // every task whose pace changed, this one included, in task order: their ends moved.
  void start(std::uint32_t task, std::span<const GpuId> gpus, double work_s, double now_s, std::vector<std::uint32_t>& changed);
  // The task stops computing (its work done, or stopped); nothing happens if it is not computing.
  void stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed);
  bool computing(std::uint32_t task) const { return jobs_.contains(task); }
  // The solo seconds of compute it started with.
  double work_s(std::uint32_t task) const { return jobs_.at(task).work.work_s; }
  // Solo seconds of its work the task has done by now_s.
  double done_s(std::uint32_t task, double now_s) const;
  // When, at its present pace, the task has `left_s` solo seconds of work left (0: when it ends).
  double reaches_s(std::uint32_t task, double left_s) const;
  // Each task's pace among n computing on a GPU of this interference.
  static double pace(std::size_t n, double interference);

 private:
  struct Job {
    std::vector<GpuId> gpus;
    PacedWork work;
  };
  void advance(std::span<const GpuId> gpus, double now_s, std::vector<std::uint32_t>& changed);
  void repace(const std::vector<std::uint32_t>& changed);

  std::vector<double> interference_;
  bool any_ = false;
  std::vector<std::vector<std::uint32_t>> computing_;  // per GPU: tasks computing on it
  std::unordered_map<std::uint32_t, Job> jobs_;
};

}  // namespace fleetsim
