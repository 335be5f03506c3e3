// What every backend's calibration shares: medians of timed runs, the date stamp, and fits of the
// points of one kernel and dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/fit.hpp"
#include "fleetsim/profile.hpp"

namespace fleetsim::measure {

// The median (the upper one of an even count); `values` must not be empty.
double median_of(std::vector<double> values);

// Now, as 2026-11-23T19:07:24Z.
std::string utc_now();

// The sizes and times of the points of `kernel` in `dtype`, in the order measured.
struct Points {
  std::vector<double> sizes, seconds;
};
Points points_of(const std::vector<Measurement>& measurements, std::string_view kernel, Dtype dtype);

template <typename Fit>
AlphaBeta fit_points(const std::vector<Measurement>& measurements, std::string_view kernel, Dtype dtype, Fit fit) {
  const Points p = points_of(measurements, kernel, dtype);
  return fit(p.sizes, p.seconds);
}

}  // namespace fleetsim::measure
