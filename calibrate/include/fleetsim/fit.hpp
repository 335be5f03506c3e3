// Least-squares fits of measurements to the model's cost laws.
#pragma once

#include <span>

namespace fleetsim {

// time = alpha + size / rate: a fixed cost and a throughput (a link's latency and bandwidth, a
// kernel's launch cost and FLOP/s). Both are kept non-negative, as the physics says: when the free fit
// gives a negative alpha, alpha is 0 and the rate is fitted through the origin.
struct AlphaBeta {
  double alpha_s = 0;
  double rate = 0;            // size units per second
  double max_rel_residual = 0;  // the worst |fitted - measured| / measured over the points
  double at(double size) const { return alpha_s + size / rate; }
};

// Needs at least two points with different sizes and positive times; throws std::invalid_argument otherwise.
AlphaBeta fit_alpha_beta(std::span<const double> sizes, std::span<const double> seconds);

// time = size / rate, for a cost the model charges with no fixed part of its own (a kernel's FLOP or
// bytes, whose fixed cost is the separately measured launch overhead): alpha is 0 by construction.
// Needs at least one point with a positive size and time.
AlphaBeta fit_rate(std::span<const double> sizes, std::span<const double> seconds);

}  // namespace fleetsim
