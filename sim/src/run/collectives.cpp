#include "collectives.hpp"

#include <algorithm>

#include "fleetsim/error.hpp"
#include "slots.hpp"

namespace fleetsim::run {

std::optional<Collectives::Blocked> Collectives::begin(TaskId task, std::uint32_t which, const CollectiveSpec& c, std::span<const GpuId> gang) {
  // The groups that run the collective at once (CollectiveSpec::group_size): block by block of size x
  // stride ranks, `stride` groups a block, each taking every stride-th rank (mirrored: and the same ranks of
  // the block as far from the end, for the first half of the blocks); or the gang as one group, planned on
  // the gang itself.
  groups_.clear();
  if (c.group_size > 0) {
    const auto size = static_cast<std::size_t>(c.group_size), stride = static_cast<std::size_t>(c.group_stride);
    const auto offset = static_cast<std::size_t>(c.group_offset), span = size * stride;
    const std::size_t blocks = gang.size() < offset ? 0 : (gang.size() - offset) / span;
    FLEETSIM_CHECK(!c.mirrored || (offset == 0 && blocks % 2 == 0 && blocks * span == gang.size()), "mirrored groups need an even number of whole blocks");
    for (std::size_t b = 0; b < (c.mirrored ? blocks / 2 : blocks); ++b) {
      for (std::size_t first = 0; first < stride; ++first) {
        for (std::size_t k = 0; k < size; ++k) groups_.push_back(gang[offset + b * span + first + k * stride]);
        for (std::size_t k = 0; c.mirrored && k < size; ++k) groups_.push_back(gang[offset + (blocks - 1 - b) * span + first + k * stride]);
      }
    }
  }
  if (c.split_groups_only) keep_split_groups(c);
  const std::span<const GpuId> ranks = c.group_size > 0 ? std::span<const GpuId>(groups_) : gang;
  const std::size_t group = c.group_size > 0 ? static_cast<std::size_t>(c.group_size) * (c.mirrored ? 2 : 1) : gang.size();
  FLEETSIM_CHECK(!ranks.empty(), "a collective's groups do not fit its gang (or none of them is split across nodes: plays() says so first)");
  for (std::size_t first = 0; first < ranks.size(); first += group) {
    if (!algorithm_applies(cluster_, topology_, c.op, c.algo, ranks.subspan(first, group))) {
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
  // Each group's plan (`stride` groups a block, in block order); the groups' steps run together, step by step.
  for (std::size_t first = 0; first < ranks.size(); first += group) {
    const std::size_t block = first / group / static_cast<std::size_t>(c.group_stride);
    FLEETSIM_CHECK(c.block_bytes.empty() || block < c.block_bytes.size(), "a collective's groups run past its blocks' bytes");
    const double bytes = c.block_bytes.empty() ? c.bytes : c.block_bytes[block];
    CollectivePlan one = plan_collective(cluster_, topology_, c.op, c.algo, ranks.subspan(first, group), bytes * c.compression / c.calls);
    if (first == 0) {
      plan = std::move(one);
      continue;
    }
    plan.run_beside(one);
  }
  if (c.calls > 1) {
    for (auto& step : plan.steps) {
      for (CollectiveFlow& f : step) {
        f.bytes *= c.calls;
        f.latency_s *= c.calls;
      }
    }
  }
  Playing& p = plans_[slot];
  p.step = 0;
  p.pending = 0;
  p.which = which;
  p.next = plan_of_[index(task)];
  plan_of_[index(task)] = slot;
  return std::nullopt;
}

// A group the collective runs in split_groups_only: one whose ranks do not all lie on its first one's node, where
// that node holds a whole group (on smaller nodes every group is split, and the training model already times them
// across nodes).
bool Collectives::split_group(std::span<const GpuId> group) const {
  const NodeId node = cluster_.node_of(group.front());
  if (cluster_.gpus_in(node) % group.size() != 0) return false;
  return std::any_of(group.begin() + 1, group.end(), [&](GpuId g) { return cluster_.node_of(g) != node; });
}

void Collectives::keep_split_groups(const CollectiveSpec& c) {
  const auto size = static_cast<std::size_t>(c.group_size);
  std::size_t kept = 0;
  for (std::size_t first = 0; first < groups_.size(); first += size) {
    if (!split_group(std::span<const GpuId>(groups_).subspan(first, size))) continue;
    if (kept != first) std::copy_n(groups_.begin() + static_cast<std::ptrdiff_t>(first), size, groups_.begin() + static_cast<std::ptrdiff_t>(kept));
    kept += size;
  }
  groups_.resize(kept);
}

bool Collectives::plays(const CollectiveSpec& c, std::span<const GpuId> gang) const {
  if (!c.split_groups_only) return true;
  FLEETSIM_CHECK(c.group_size > 1 && c.group_stride == 1 && c.group_offset == 0 && !c.mirrored && c.block_bytes.empty(),
                 "split groups only: groups of consecutive ranks from the first, not mirrored, of one size of data");
  const auto size = static_cast<std::size_t>(c.group_size);
  for (std::size_t first = 0; first + size <= gang.size(); first += size) {
    if (split_group(gang.subspan(first, size))) return true;
  }
  return false;
}

Collectives::Playing* Collectives::find(TaskId task, std::uint32_t which) {
  for (std::uint32_t slot = plan_of_[index(task)]; slot != kNone; slot = plans_[slot].next) {
    if (plans_[slot].which == which) return &plans_[slot];
  }
  return nullptr;
}

const std::vector<CollectiveFlow>* Collectives::next_step(TaskId task, std::uint32_t which) {
  Playing& p = *find(task, which);
  if (p.step == p.plan.steps.size()) {
    give_back(task, which);
    return nullptr;
  }
  p.pending = static_cast<std::uint32_t>(p.plan.steps[p.step].size());
  return &p.plan.steps[p.step++];
}

bool Collectives::delivered(TaskId task, std::uint32_t which) {
  Playing* p = find(task, which);
  return p != nullptr && --p->pending == 0;
}

void Collectives::give_back(TaskId task, std::uint32_t which) {
  for (std::uint32_t* link = &plan_of_[index(task)]; *link != kNone; link = &plans_[*link].next) {
    if (plans_[*link].which != which) continue;
    free_.push_back(*link);
    *link = plans_[*link].next;
    return;
  }
}

void Collectives::drop(TaskId task) {
  for (std::uint32_t slot = plan_of_[index(task)]; slot != kNone; slot = plans_[slot].next) free_.push_back(slot);
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
