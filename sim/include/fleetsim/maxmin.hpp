// Max-min fair sharing of link capacities among flows, by progressive filling: all flows' rates
// rise together; when a link saturates, the flows crossing it are frozen at the level reached;
// the others go on rising. The result is the unique allocation in which no flow can get more
// without taking from a flow that has no more than it. A pure function with its own tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fleetsim {

class MaxMinSolver {
 public:
  // Flow f crosses links flow_links[flow_offsets[f] .. flow_offsets[f+1]); links are indices into
  // `capacity`. A link listed k times for a flow carries k times its rate (host memory a transfer is
  // staged in: written, then read). Every flow must cross at least one link; capacities are non-negative
  // numbers (not NaN). Writes one rate per flow into `rates`.
  void solve(std::span<const double> capacity, std::span<const std::uint32_t> flow_offsets,
             std::span<const std::uint32_t> flow_links, std::span<double> rates);
  // Fills level by level even where a shortcut gives the same rates, bit for bit (for the tests that hold it to that).
  void always_fill(bool on) { always_fill_ = on; }

 private:
  bool one_level(std::span<const double> capacity, std::span<const std::uint32_t> flow_offsets,
                 std::span<const std::uint32_t> flow_links, std::span<double> rates);
  bool always_fill_ = false;
  // A link that may saturate, under its share when last looked at; the smallest share (then the lowest link) first.
  struct Candidate {
    double share;
    std::uint32_t link;
    bool before(const Candidate& o) const { return share < o.share || (share == o.share && link < o.link); }
  };
  // The candidates as a 4-ary min-heap: a stale key on top is raised in place and sunk, not popped and pushed
  // (a congested fabric's solves spent half their time in a binary heap's pops and pushes).
  static constexpr std::size_t kArity = 4;
  static constexpr std::size_t kScanAtMost = 16;
  void sift_down(std::size_t i);
  void pop_top();
  std::vector<double> remaining_, bound_, demand_;
  std::vector<std::uint32_t> unfrozen_on_link_;
  std::vector<std::uint8_t> frozen_;
  std::vector<std::uint32_t> link_offsets_, link_flows_, fill_, seen_by_;
  std::vector<Candidate> heap_;
};

}  // namespace fleetsim
