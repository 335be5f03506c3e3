#include "collectives.hpp"

#include "slots.hpp"

namespace fleetsim::run {

namespace {

// The gang's ranks in groups that run the collective at once (CollectiveSpec::group_size): block by
// block of size x stride ranks, `stride` groups a block, each taking every stride-th rank.
std::vector<std::vector<GpuId>> groups_of(const CollectiveSpec& c, std::span<const GpuId> gang) {
  const std::size_t size = c.group_size > 0 ? static_cast<std::size_t>(c.group_size) : gang.size();
  const std::size_t stride = c.group_size > 0 ? static_cast<std::size_t>(c.group_stride) : 1;
  std::vector<std::vector<GpuId>> groups;
  for (std::size_t block = 0; block + size * stride <= gang.size(); block += size * stride) {
    for (std::size_t first = 0; first < stride; ++first) {
      std::vector<GpuId>& g = groups.emplace_back();
      for (std::size_t k = 0; k < size; ++k) g.push_back(gang[block + first + k * stride]);
    }
  }
  return groups;
}

}  // namespace

std::optional<Collectives::Blocked> Collectives::begin(TaskId task, const CollectiveSpec& c, std::span<const GpuId> gang) {
  const std::vector<std::vector<GpuId>> groups = groups_of(c, gang);
  for (const std::vector<GpuId>& g : groups) {
    if (!algorithm_applies(cluster_, topology_, c.op, c.algo, g)) {
      return Blocked{false, std::string(collective_algo_name(c.algo)) + " cannot run " + std::string(collective_op_name(c.op)) +
                                " on the GPUs it was placed on"};
    }
  }
  // Plans are made over the links up now.
  if (const auto cut = split(gang)) {
    return Blocked{true, "link failures left no route from GPU " + cluster_.gpu_name(gang[0]) + " to GPU " + cluster_.gpu_name(*cut)};
  }
  const std::uint32_t slot = take_slot(plans_, free_);
  CollectivePlan& plan = plans_[slot].plan;
  // Each group's plan; the groups' steps run together, step by step.
  for (std::size_t i = 0; i < groups.size(); ++i) {
    CollectivePlan group = plan_collective(cluster_, topology_, c.op, c.algo, groups[i], c.bytes * c.compression / c.calls);
    if (i == 0) {
      plan = std::move(group);
      continue;
    }
    if (group.steps.size() > plan.steps.size()) plan.steps.resize(group.steps.size());
    for (std::size_t k = 0; k < group.steps.size(); ++k) plan.steps[k].insert(plan.steps[k].end(), group.steps[k].begin(), group.steps[k].end());
  }
  if (c.calls > 1) {
    for (auto& step : plan.steps) {
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
