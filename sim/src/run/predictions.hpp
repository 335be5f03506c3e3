// What a run knows of each workflow's tasks before running any: their models, interned to small
// integers (GPU caches and policies compare them), and the predictions policies order by: each
// task's mean roofline time over the cluster's GPUs, its upward rank (itself plus the longest path
// after it) and its workflow's totals.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim::run {

class Predictions {
 public:
  Predictions(const Scenario& scenario, const Cluster& cluster, const ComputeModel& compute);

  // A GPU holds one shard of a model: one id per (model, shard size); kNoModel where there are no weights.
  std::uint32_t model(std::uint32_t workflow, std::uint32_t task) const { return model_[workflow][task]; }
  double mean_s(std::uint32_t workflow, std::uint32_t task) const { return mean_s_[workflow][task]; }
  double rank_s(std::uint32_t workflow, std::uint32_t task) const { return rank_s_[workflow][task]; }
  double job_s(std::uint32_t workflow) const { return job_s_[workflow]; }
  const std::vector<double>& job_gpu_s() const { return job_gpu_s_; }  // per workflow
  // The workflow's critical path: its entry tasks' largest upward rank.
  double critical_path_s(std::uint32_t workflow) const;

 private:
  std::vector<std::vector<std::uint32_t>> model_;
  std::vector<std::vector<double>> mean_s_, rank_s_;
  std::vector<double> job_s_, job_gpu_s_;
};

}  // namespace fleetsim::run
