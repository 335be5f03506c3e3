// Time-weighted means over even bins of a run: what the run page and the comparison page draw over time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace fleetsim {

struct Trace;

// Time bins of the over-time charts (the run page's, the comparison's queue).
inline constexpr std::size_t kOverTimeBins = 200;

// Time-weighted means of a piecewise-constant quantity over even bins of [0, end): add(t0, t1, v) adds v
// over [t0, t1).
class TimeBins {
 public:
  TimeBins(double end_s, std::size_t bins) : width_(std::max(end_s, 1e-9) / static_cast<double>(bins)), sum_(bins, 0.0) {}
  void add(double t0, double t1, double v) {
    if (t1 <= t0 || v == 0) return;
    const std::size_t n = sum_.size();
    const std::size_t first = std::min(n - 1, static_cast<std::size_t>(t0 / width_));
    for (std::size_t b = first; b < n; ++b) {
      const double lo = static_cast<double>(b) * width_, hi = lo + width_;
      if (lo >= t1) break;
      sum_[b] += v * (std::min(t1, hi) - std::max(t0, lo));
    }
  }
  double mean(std::size_t b) const { return sum_[b] / width_; }
  double mid(std::size_t b) const { return (static_cast<double>(b) + 0.5) * width_; }
  std::size_t size() const { return sum_.size(); }
  // (bin middle, mean x scale) for each bin.
  std::vector<std::pair<double, double>> series(double scale) const {
    std::vector<std::pair<double, double>> s;
    for (std::size_t b = 0; b < size(); ++b) s.emplace_back(mid(b), mean(b) * scale);
    return s;
  }

 private:
  double width_;
  std::vector<double> sum_;
};

// Ready tasks waiting for GPUs over a run that ended at end_s: each task from when it last became ready to
// its start (or the end), time-averaged in `bins` bins.
TimeBins waiting_tasks(const Trace& trace, double end_s, std::size_t bins);

}  // namespace fleetsim
