// What the cluster costs: the hourly rate of the nodes billed now (spot nodes at their price factor),
// sampled at every change for the cost timeline.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/simulation.hpp"

namespace fleetsim::run {

class Billing {
 public:
  Billing(const Scenario& scenario, const Cluster& cluster, const EventQueue& queue, bool record_samples);

  // Hourly price of a node.
  double node_rate(std::uint32_t node) const;
  // Whether the node is a spot node (the last `spot.nodes` of the cluster).
  bool spot(std::uint32_t node) const { return node >= spot_first_; }
  std::uint32_t spot_first() const { return spot_first_; }
  // The node starts or stops being billed now.
  void start(std::uint32_t node) { add(node_rate(node)); }
  void stop(std::uint32_t node) { add(-node_rate(node)); }
  // The timeline starts at $0/h at time 0 when nothing was billed at the start.
  void open_timeline();
  // What the node cost over `on_s` seconds billed.
  double cost_usd(std::uint32_t node, double on_s) const;
  std::vector<CostSample> take_samples() { return std::move(samples_); }

 private:
  void add(double delta_usd_per_hour);
  double price_factor(std::uint32_t node) const;  // spot nodes' factor, else 1

  const Scenario& sc_;
  const Cluster& cluster_;
  const EventQueue& queue_;
  bool record_;
  std::uint32_t spot_first_;
  double rate_ = 0;  // $ per hour of the nodes billed now
  std::vector<CostSample> samples_;
};

}  // namespace fleetsim::run
