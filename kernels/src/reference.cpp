// The kernels' CPU twins: what each GPU kernel must compute, written for clarity, accumulating in
// double precision.
#include <algorithm>
#include <cmath>

#include "fleetsim/kernels.hpp"

namespace fleetsim::gpu::reference {

void triad(float* a, const float* b, const float* c, float scalar, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) a[i] = b[i] + scalar * c[i];
}

void accumulate(float* dst, const float* src, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
}

void softmax_rows(const float* in, float* out, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* row = in + static_cast<std::size_t>(r) * cols;
    float* dst = out + static_cast<std::size_t>(r) * cols;
    const double m = *std::max_element(row, row + cols);
    double s = 0;
    for (int j = 0; j < cols; ++j) s += std::exp(row[j] - m);
    for (int j = 0; j < cols; ++j) dst[j] = static_cast<float>(std::exp(row[j] - m) / s);
  }
}

void layernorm_rows(const float* in, float* out, int rows, int cols, float epsilon) {
  for (int r = 0; r < rows; ++r) {
    const float* row = in + static_cast<std::size_t>(r) * cols;
    float* dst = out + static_cast<std::size_t>(r) * cols;
    double s = 0;
    for (int j = 0; j < cols; ++j) s += row[j];
    const double mean = s / cols;
    double q = 0;
    for (int j = 0; j < cols; ++j) q += (row[j] - mean) * (row[j] - mean);
    const double inv = 1 / std::sqrt(q / cols + epsilon);
    for (int j = 0; j < cols; ++j) dst[j] = static_cast<float>((row[j] - mean) * inv);
  }
}

void gemm(int m, int n, int k, const float* a, const float* b, float* c) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += static_cast<double>(a[i + static_cast<std::size_t>(p) * m]) * b[p + static_cast<std::size_t>(j) * k];
      c[i + static_cast<std::size_t>(j) * m] = static_cast<float>(s);
    }
  }
}

}  // namespace fleetsim::gpu::reference
