#include "predictions.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "fleetsim/memory.hpp"

namespace fleetsim::run {

Predictions::Predictions(const Scenario& sc, const Cluster& cluster, const ComputeModel& compute) {
  std::map<std::pair<std::string, double>, std::uint32_t> models;
  for (const Workflow& wf : sc.workflows) {
    auto& ids = model_.emplace_back();
    for (const TaskSpec& t : wf.tasks) {
      if (t.model.empty() || t.weights_bytes <= 0) {
        ids.push_back(kNoModel);
      } else {
        const auto key = std::pair{t.model, t.weights_per_gpu_bytes()};
        ids.push_back(models.emplace(key, static_cast<std::uint32_t>(models.size())).first->second);
      }
    }
  }
  for (const Workflow& wf : sc.workflows) {
    std::vector<double> mean(wf.tasks.size(), 0.0);
    for (std::size_t t = 0; t < wf.tasks.size(); ++t) {
      const TaskSpec& s = wf.tasks[t];
      // A node group's GPUs are all of one type: one estimate per group, weighted by its GPUs.
      for (const NodeGroup& group : cluster.spec().groups) {
        mean[t] += static_cast<double>(group.count) * group.node.gpus * compute.of(s, group.gpu, 1.0 / s.gpus).total_s();
      }
      mean[t] /= cluster.gpu_count();
    }
    mean_s_.push_back(mean);
    auto& rank = rank_s_.emplace_back(wf.tasks.size(), 0.0);
    const auto& topo = wf.topological_order();
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      double after = 0;
      for (std::uint32_t e : wf.outputs(*it)) after = std::max(after, rank[wf.edges[e].to]);
      rank[*it] = mean[*it] + after;
    }
    double total = 0, gpu_s = 0;
    for (std::size_t t = 0; t < mean.size(); ++t) {
      total += mean[t];
      gpu_s += mean[t] * wf.tasks[t].gpus;
    }
    job_s_.push_back(total);
    job_gpu_s_.push_back(gpu_s);
  }
}

double Predictions::critical_path_s(std::uint32_t workflow) const {
  double path = 0;
  for (double r : rank_s_[workflow]) path = std::max(path, r);
  return path;
}

}  // namespace fleetsim::run
