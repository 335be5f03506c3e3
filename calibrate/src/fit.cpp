#include "fleetsim/fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fleetsim {

AlphaBeta fit_alpha_beta(std::span<const double> sizes, std::span<const double> seconds) {
  if (sizes.size() != seconds.size() || sizes.size() < 2) throw std::invalid_argument("an alpha-beta fit needs two or more points");
  const auto n = static_cast<Eigen::Index>(sizes.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd t(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!(seconds[i] > 0) || !(sizes[i] >= 0)) throw std::invalid_argument("an alpha-beta fit needs positive times and sizes");
    a(i, 0) = 1;
    a(i, 1) = sizes[i];
    t(i) = seconds[i];
  }
  if (a.col(1).maxCoeff() == a.col(1).minCoeff()) throw std::invalid_argument("an alpha-beta fit needs two different sizes");
  // Relative residuals matter (points span orders of magnitude): weight each row by 1 / time.
  const Eigen::VectorXd w = t.cwiseInverse();
  Eigen::Vector2d x = (w.asDiagonal() * a).colPivHouseholderQr().solve(w.asDiagonal() * t);
  if (x(0) < 0 || x(1) <= 0) {
    const Eigen::VectorXd col = w.asDiagonal() * a.col(1);
    x = {0.0, col.dot(w.asDiagonal() * t) / col.squaredNorm()};
  }
  AlphaBeta fit{x(0), 1 / x(1), 0};
  for (Eigen::Index i = 0; i < n; ++i) fit.max_rel_residual = std::max(fit.max_rel_residual, std::abs(fit.at(sizes[i]) - t(i)) / t(i));
  return fit;
}

AlphaBeta fit_rate(std::span<const double> sizes, std::span<const double> seconds) {
  if (sizes.size() != seconds.size() || sizes.empty()) throw std::invalid_argument("a rate fit needs one or more points");
  // Least squares on relative residuals: minimise sum((size_i / (rate t_i) - 1)^2) over 1 / rate.
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (!(seconds[i] > 0) || !(sizes[i] > 0)) throw std::invalid_argument("a rate fit needs positive times and sizes");
    const double r = sizes[i] / seconds[i];
    sum += r;
    sum_sq += r * r;
  }
  AlphaBeta fit{0, sum_sq / sum, 0};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    fit.max_rel_residual = std::max(fit.max_rel_residual, std::abs(fit.at(sizes[i]) - seconds[i]) / seconds[i]);
  }
  return fit;
}

}  // namespace fleetsim
