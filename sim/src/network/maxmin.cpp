#include "fleetsim/maxmin.hpp"

#include <algorithm>

#include "fleetsim/error.hpp"

namespace fleetsim {

// Progressive filling, bottleneck by bottleneck: the link whose fair share (capacity left over flows
// left) is smallest saturates first, at exactly that share for each of its flows. Freezing them
// can only raise the other links' shares, so a heap of links by share yields the bottlenecks in
// order, in O(F * hops * log L) rather than a pass over every flow per level.
void MaxMinSolver::solve(std::span<const double> capacity, std::span<const std::uint32_t> flow_offsets,
                         std::span<const std::uint32_t> flow_links, std::span<double> rates) {
  const std::size_t flows = rates.size();
  const std::size_t links = capacity.size();
  FLEETSIM_CHECK(flow_offsets.size() == flows + 1, "flow_offsets must have one entry per flow plus one");
  // One pass over the flows: how many cross each link, each flow's bound, and each link's demand. A flow never gets
  // more than the least capacity of its route (less where it crosses a link twice), so a link whose flows' bounds add
  // up to less than its capacity can never saturate, never freezes a flow and needs no place among the candidates:
  // on fabrics with headroom most links are such.
  unfrozen_on_link_.assign(links, 0);
  demand_.assign(links, 0.0);
  bound_.resize(flows);
  for (std::size_t f = 0; f < flows; ++f) {
    FLEETSIM_CHECK(flow_offsets[f + 1] > flow_offsets[f], "a flow must cross at least one link");
    const std::uint32_t* first = flow_links.data() + flow_offsets[f];
    const std::uint32_t* last = flow_links.data() + flow_offsets[f + 1];
    double b = capacity[*first];
    for (const std::uint32_t* l = first; l != last; ++l) {
      ++unfrozen_on_link_[*l];
      b = std::min(b, capacity[*l]);
    }
    bound_[f] = b;
    for (const std::uint32_t* l = first; l != last; ++l) demand_[*l] += b;
  }
  if (!always_fill_ && flows > 1 && one_level(capacity, flow_offsets, flow_links, rates)) return;

  // The links that may saturate, each keyed by its share now (capacity over its crossings). Where none is crossed
  // more than once, no flow's freezing takes from another's links: each gets its bound, the capacity of its
  // narrowest link (crossed once, by it alone), exactly as the filling below would give it. Flows all at their caps
  // (a collective shaped onto NCCL's estimate: a large all-to-all's million) take this way.
  heap_.clear();
  bool shared_saturates = false;
  for (std::uint32_t l = 0; l < links; ++l) {
    if (unfrozen_on_link_[l] == 0 || demand_[l] < capacity[l] * (1 - 1e-12)) continue;
    heap_.push_back(Candidate{capacity[l] / unfrozen_on_link_[l], l});
    shared_saturates = shared_saturates || unfrozen_on_link_[l] > 1;
  }
  if (!shared_saturates) {
    std::copy(bound_.begin(), bound_.end(), rates.begin());
    return;
  }
  remaining_.assign(capacity.begin(), capacity.end());
  frozen_.assign(flows, 0);

  // Keys are lower bounds: a link's share only rises as flows elsewhere freeze, so a key on top that has gone stale
  // takes the current share and sinks; a fresh one is the true minimum. A link has one entry at most, so the order
  // of entries is total and the links come out in the same order from any heap.
  // A few candidates (a re-levelling's small set) are scanned for the least instead, and a saturating link's flows
  // found by walking the flows left: the same entries in the same order, without building a heap or an index of
  // each link's flows.
  const bool scan = heap_.size() <= kScanAtMost;
  if (!scan) {
    // The flows of each link, as offsets into one array.
    link_offsets_.assign(links + 1, 0);
    for (std::uint32_t l = 0; l < links; ++l) link_offsets_[l + 1] = link_offsets_[l] + unfrozen_on_link_[l];
    link_flows_.resize(flow_links.size());
    fill_.assign(link_offsets_.begin(), link_offsets_.end() - 1);
    for (std::uint32_t f = 0; f < flows; ++f) {
      for (std::uint32_t i = flow_offsets[f]; i < flow_offsets[f + 1]; ++i) link_flows_[fill_[flow_links[i]]++] = f;
    }
    if (heap_.size() > 1) {
      for (std::size_t i = (heap_.size() - 2) / kArity + 1; i-- > 0;) sift_down(i);
    }
  }
  const auto least = [&]() -> std::size_t {
    if (!scan) return 0;
    std::size_t at = 0;
    for (std::size_t i = 1; i < heap_.size(); ++i) {
      if (heap_[i].before(heap_[at])) at = i;
    }
    return at;
  };
  const auto remove = [&](std::size_t at) {
    if (!scan) return pop_top();
    heap_[at] = heap_.back();
    heap_.pop_back();
  };
  // A flow at the link's share: what it takes leaves each link of its route (the flows in order, as they are listed).
  std::size_t unfrozen = flows;
  const auto freeze = [&](std::uint32_t f, double share) {
    frozen_[f] = 1;
    --unfrozen;
    rates[f] = share;
    for (std::uint32_t j = flow_offsets[f]; j < flow_offsets[f + 1]; ++j) {
      const std::uint32_t l = flow_links[j];
      remaining_[l] = std::max(0.0, remaining_[l] - share);
      --unfrozen_on_link_[l];
    }
  };
  // Once every flow is frozen, the entries left hold links whose flows all froze elsewhere: nothing to pop for.
  while (unfrozen > 0 && !heap_.empty()) {
    const std::size_t at = least();
    const Candidate c = heap_[at];
    if (unfrozen_on_link_[c.link] == 0) {  // all its flows froze elsewhere
      remove(at);
      continue;
    }
    const double share = remaining_[c.link] / unfrozen_on_link_[c.link];
    if (share > c.share * (1 + 1e-12)) {
      heap_[at].share = share;
      if (!scan) sift_down(0);
      continue;
    }
    remove(at);
    if (!scan) {
      for (std::uint32_t i = link_offsets_[c.link]; i < link_offsets_[c.link + 1]; ++i) {
        if (frozen_[link_flows_[i]] == 0) freeze(link_flows_[i], share);
      }
      continue;
    }
    for (std::uint32_t f = 0; f < flows && unfrozen_on_link_[c.link] > 0; ++f) {
      if (frozen_[f] != 0) continue;
      const std::uint32_t* first = flow_links.data() + flow_offsets[f];
      const std::uint32_t* last = flow_links.data() + flow_offsets[f + 1];
      if (std::find(first, last, c.link) != last) freeze(f, share);
    }
  }
}

void MaxMinSolver::sift_down(std::size_t i) {
  const Candidate moving = heap_[i];
  for (;;) {
    const std::size_t first = kArity * i + 1;
    if (first >= heap_.size()) break;
    std::size_t least = first;
    for (std::size_t c = first + 1; c < std::min(first + kArity, heap_.size()); ++c) {
      if (heap_[c].before(heap_[least])) least = c;
    }
    if (!heap_[least].before(moving)) break;
    heap_[i] = heap_[least];
    i = least;
  }
  heap_[i] = moving;
}

void MaxMinSolver::pop_top() {
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0);
}

// The filling's first level, when it is the last: a link that every flow crosses once, with a fair share below
// every other link's (its capacity over the crossings on it), saturates first and freezes every flow at that
// share, and nothing moves after. A fork's transfers out of one NIC are such a problem. The rates are the ones the
// heap below gives, bit for bit: the same division, by the same link (the lowest-numbered of those at the least
// share, as the heap orders ties), which the heap holds only when its flows' bounds add up to its capacity, summed
// in the same order. A link at that same share that every flow crosses once freezes them at the same value; one
// that only some cross, or that a flow crosses twice, would split the level, so it is left to the heap.
bool MaxMinSolver::one_level(std::span<const double> capacity, std::span<const std::uint32_t> flow_offsets,
                             std::span<const std::uint32_t> flow_links, std::span<double> rates) {
  const std::size_t flows = rates.size();
  const std::size_t links = capacity.size();
  constexpr std::uint32_t kNoLink = 0xFFFFFFFFu;
  std::uint32_t level_link = kNoLink;
  double level = 0;
  for (std::uint32_t l = 0; l < links; ++l) {
    if (unfrozen_on_link_[l] != flows) continue;
    const double share = capacity[l] / unfrozen_on_link_[l];
    if (level_link == kNoLink || share < level) {
      level_link = l;
      level = share;
    }
  }
  if (level_link == kNoLink) return false;
  std::uint32_t at_level = 0;  // links at the level's share, every one crossed by every flow
  for (std::uint32_t l = 0; l < links; ++l) {
    if (unfrozen_on_link_[l] == 0) continue;
    const double share = capacity[l] / unfrozen_on_link_[l];
    if (share < level || (share == level && unfrozen_on_link_[l] != flows)) return false;
    at_level += share == level ? 1 : 0;
  }
  // Each flow crosses each link at the level once; its bound (its narrowest link) goes into the level link's demand.
  seen_by_.assign(links, kNoLink);
  double demand = 0;
  for (std::uint32_t f = 0; f < flows; ++f) {
    double bound = capacity[flow_links[flow_offsets[f]]];
    std::uint32_t crossed = 0;
    for (std::uint32_t i = flow_offsets[f]; i < flow_offsets[f + 1]; ++i) {
      const std::uint32_t l = flow_links[i];
      bound = std::min(bound, capacity[l]);
      if (unfrozen_on_link_[l] != flows || capacity[l] / unfrozen_on_link_[l] != level) continue;
      if (seen_by_[l] == f) return false;
      seen_by_[l] = f;
      ++crossed;
    }
    if (crossed != at_level) return false;
    demand += bound;
  }
  // Each bound is at least the level, so this holds once the checks above do; it is the heap's own test, kept so
  // that the two ways stay in step.
  if (demand < capacity[level_link] * (1 - 1e-12)) return false;
  std::fill(rates.begin(), rates.end(), level);
  return true;
}

}  // namespace fleetsim
