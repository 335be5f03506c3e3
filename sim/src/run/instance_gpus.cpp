#include "instance_gpus.hpp"

#include <algorithm>
#include <utility>

namespace fleetsim::run {

bool InstanceGpus::wait(std::uint32_t instance, TaskId task) {
  const auto [it, first] = held_.try_emplace(instance);
  if (first) return false;  // the instance's first ready task: the policy places it
  if (it->second.queue.empty()) waiting_.push_back(instance);
  it->second.queue.push_back(task);
  return true;
}

std::vector<std::pair<TaskId, GpuId>> InstanceGpus::take_startable() {
  std::vector<std::pair<TaskId, GpuId>> starts;
  std::erase_if(waiting_, [&](std::uint32_t instance) {
    Held& h = held_.at(instance);
    if (h.gpu != kNone && occupancy_.tasks_on(h.gpu).empty() && !occupancy_.down(h.gpu)) {
      starts.emplace_back(h.queue.front(), make_id<GpuId>(h.gpu));
      h.queue.pop_front();
    }
    return h.queue.empty();
  });
  return starts;
}

void InstanceGpus::started(std::uint32_t instance, std::uint32_t gpu) {
  Held& h = held_.at(instance);
  if (h.gpu != kNone) return;
  h.gpu = gpu;
  occupancy_.set_held(gpu, true);
}

std::deque<TaskId> InstanceGpus::drop_waiting(std::uint32_t instance) {
  const auto it = held_.find(instance);
  if (it == held_.end() || it->second.queue.empty()) return {};
  std::erase(waiting_, instance);
  return std::exchange(it->second.queue, {});
}

void InstanceGpus::ended(std::uint32_t instance) {
  const auto it = held_.find(instance);
  if (it == held_.end()) return;
  if (it->second.gpu != kNone) occupancy_.set_held(it->second.gpu, false);
  std::erase(waiting_, instance);
  held_.erase(it);
}

}  // namespace fleetsim::run
