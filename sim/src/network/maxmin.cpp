#include "fleetsim/maxmin.hpp"

#include <algorithm>
#include <limits>

#include "fleetsim/error.hpp"

namespace fleetsim {

void MaxMinSolver::solve(std::span<const double> capacity, std::span<const std::uint32_t> flow_offsets,
                         std::span<const std::uint32_t> flow_links, std::span<double> rates) {
  const std::size_t flows = rates.size();
  FLEETSIM_CHECK(flow_offsets.size() == flows + 1, "flow_offsets must have one entry per flow plus one");
  remaining_.assign(capacity.begin(), capacity.end());
  unfrozen_on_link_.assign(capacity.size(), 0);
  saturated_.assign(capacity.size(), 0);
  active_links_.clear();
  unfrozen_flows_.clear();
  for (std::size_t f = 0; f < flows; ++f) {
    FLEETSIM_CHECK(flow_offsets[f + 1] > flow_offsets[f], "a flow must cross at least one link");
    unfrozen_flows_.push_back(static_cast<std::uint32_t>(f));
    for (std::uint32_t i = flow_offsets[f]; i < flow_offsets[f + 1]; ++i) {
      if (unfrozen_on_link_[flow_links[i]]++ == 0) active_links_.push_back(flow_links[i]);
    }
  }

  double level = 0.0;  // the rate every unfrozen flow has reached
  while (!unfrozen_flows_.empty()) {
    // The next link to saturate bounds how far every unfrozen flow can still rise.
    double step = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : active_links_) step = std::min(step, remaining_[l] / unfrozen_on_link_[l]);
    level += step;
    for (std::uint32_t l : active_links_) {
      remaining_[l] -= step * unfrozen_on_link_[l];
      // A relative tolerance: capacities span from 1e6 to 1e12 bytes/s.
      saturated_[l] = remaining_[l] <= 1e-9 * capacity[l] ? 1 : 0;
    }
    std::size_t kept = 0;
    for (std::uint32_t f : unfrozen_flows_) {
      bool bottlenecked = false;
      for (std::uint32_t i = flow_offsets[f]; i < flow_offsets[f + 1]; ++i) {
        bottlenecked = bottlenecked || saturated_[flow_links[i]] != 0;
      }
      if (!bottlenecked) {
        unfrozen_flows_[kept++] = f;
        continue;
      }
      rates[f] = level;
      for (std::uint32_t i = flow_offsets[f]; i < flow_offsets[f + 1]; ++i) --unfrozen_on_link_[flow_links[i]];
    }
    FLEETSIM_CHECK(kept < unfrozen_flows_.size(), "progressive filling made no progress");
    unfrozen_flows_.resize(kept);
    // Saturated links, and links whose flows are all frozen, are out of play.
    std::erase_if(active_links_, [&](std::uint32_t l) { return saturated_[l] != 0 || unfrozen_on_link_[l] == 0; });
  }
}

}  // namespace fleetsim
