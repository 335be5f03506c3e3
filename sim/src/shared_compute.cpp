#include "shared_compute.hpp"

#include <algorithm>

namespace fleetsim {

SharedCompute::SharedCompute(std::vector<double> interference)
    : interference_(std::move(interference)), computing_(interference_.size()) {
  any_ = std::any_of(interference_.begin(), interference_.end(), [](double f) { return f >= 0; });
}

double SharedCompute::pace(std::size_t n, double interference) {
  const auto k = static_cast<double>(std::max<std::size_t>(n, 1));
  return 1 / (k * (1 + interference * (k - 1)));
}

// Brings the jobs on these GPUs up to now at their old paces; `changed` lists them once each.
void SharedCompute::advance(std::span<const GpuId> gpus, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  for (GpuId g : gpus) changed.insert(changed.end(), computing_[index(g)].begin(), computing_[index(g)].end());
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (std::uint32_t t : changed) jobs_.at(t).work.advance(now_s);
}

void SharedCompute::repace(const std::vector<std::uint32_t>& changed) {
  for (std::uint32_t t : changed) {
    Job& j = jobs_.at(t);
    j.work.pace = 1;
    for (GpuId g : j.gpus) j.work.pace = std::min(j.work.pace, pace(computing_[index(g)].size(), interference_[index(g)]));
  }
}

void SharedCompute::start(std::uint32_t task, std::span<const GpuId> gpus, double work_s, double now_s,
                          std::vector<std::uint32_t>& changed) {
  advance(gpus, now_s, changed);
  jobs_[task] = Job{{gpus.begin(), gpus.end()}, PacedWork::starting(work_s, now_s)};
  for (GpuId g : gpus) computing_[index(g)].push_back(task);
  changed.insert(std::upper_bound(changed.begin(), changed.end(), task), task);
  repace(changed);
}

void SharedCompute::stop(std::uint32_t task, double now_s, std::vector<std::uint32_t>& changed) {
  changed.clear();
  const auto it = jobs_.find(task);
  if (it == jobs_.end()) return;
  const std::vector<GpuId> gpus = std::move(it->second.gpus);
  jobs_.erase(it);
  for (GpuId g : gpus) std::erase(computing_[index(g)], task);
  advance(gpus, now_s, changed);
  repace(changed);
}

double SharedCompute::done_s(std::uint32_t task, double now_s) const { return jobs_.at(task).work.done_s(now_s); }

double SharedCompute::reaches_s(std::uint32_t task, double left_s) const { return jobs_.at(task).work.reaches_s(left_s); }

}  // namespace fleetsim
