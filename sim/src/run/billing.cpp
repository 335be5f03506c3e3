#include "billing.hpp"

namespace fleetsim::run {

Billing::Billing(const Scenario& sc, const Cluster& cluster, const EventQueue& queue, bool record_samples)
    : sc_(sc),
      cluster_(cluster),
      queue_(queue),
      record_(record_samples),
      spot_first_(cluster.node_count() - static_cast<std::uint32_t>(sc.spot.nodes)) {}

double Billing::price_factor(std::uint32_t n) const { return spot(n) ? sc_.spot.price_factor : 1.0; }

double Billing::node_rate(std::uint32_t n) const {
  const NodeId node = make_id<NodeId>(n);
  return cluster_.gpu_type(cluster_.first_gpu(node)).price_usd_per_hour * cluster_.gpus_in(node) * price_factor(n);
}

void Billing::open_timeline() {
  if (samples_.empty() && record_) samples_.push_back({0.0, 0.0});
}

double Billing::cost_usd(std::uint32_t n, double on_s) const {
  const NodeId node = make_id<NodeId>(n);
  return on_s / 3600 * cluster_.gpu_type(cluster_.first_gpu(node)).price_usd_per_hour * cluster_.gpus_in(node) * price_factor(n);
}

void Billing::add(double delta_usd_per_hour) {
  rate_ += delta_usd_per_hour;
  if (!record_) return;
  if (!samples_.empty() && samples_.back().time_s == queue_.now()) {
    samples_.back().usd_per_hour = rate_;
  } else {
    samples_.push_back({queue_.now(), rate_});
  }
}

}  // namespace fleetsim::run
