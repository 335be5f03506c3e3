#include "collectives.hpp"

#include "slots.hpp"

namespace fleetsim::run {

std::optional<Collectives::Blocked> Collectives::begin(TaskId task, const CollectiveSpec& c, std::span<const GpuId> gang) {
  if (!algorithm_applies(cluster_, topology_, c.op, c.algo, gang)) {
    return Blocked{false, std::string(collective_algo_name(c.algo)) + " cannot run " + std::string(collective_op_name(c.op)) +
                              " on the GPUs it was placed on"};
  }
  // Plans are made over the links up now.
  if (const auto cut = split(gang)) {
    return Blocked{true, "link failures left no route from GPU " + cluster_.gpu_name(gang[0]) + " to GPU " + cluster_.gpu_name(*cut)};
  }
  const std::uint32_t slot = take_slot(plans_, free_);
  plans_[slot].plan = plan_collective(cluster_, topology_, c.op, c.algo, gang, c.bytes * c.compression / c.calls);
  if (c.calls > 1) {
    for (auto& step : plans_[slot].plan.steps) {
      for (CollectiveFlow& f : step) {
        f.bytes *= c.calls;
        f.latency_s *= c.calls;
      }
    }
  }
  plans_[slot].step = 0;
  plan_of_[index(task)] = slot;
  return std::nullopt;
}

const std::vector<CollectiveFlow>* Collectives::next_step(TaskId task) {
  Playing& p = plans_[plan_of_[index(task)]];
  if (p.step == p.plan.steps.size()) {
    drop(task);
    return nullptr;
  }
  return &p.plan.steps[p.step++];
}

void Collectives::drop(TaskId task) {
  if (plan_of_[index(task)] == kNone) return;
  free_.push_back(plan_of_[index(task)]);
  plan_of_[index(task)] = kNone;
}

std::optional<GpuId> Collectives::split(std::span<const GpuId> gang) const {
  if (!topology_.any_link_down()) return std::nullopt;
  for (GpuId g : gang.subspan(1)) {
    if (!topology_.reachable(topology_.gpu_vertex(gang[0]), topology_.gpu_vertex(g)) ||
        !topology_.reachable(topology_.gpu_vertex(g), topology_.gpu_vertex(gang[0]))) {
      return g;
    }
  }
  return std::nullopt;
}

}  // namespace fleetsim::run
