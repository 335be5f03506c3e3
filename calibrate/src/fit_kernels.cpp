#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "fleetsim/measured_kernels.hpp"

namespace fleetsim {
namespace {

// Nelder-Mead from x0 with the usual coefficients, for a few parameters.
std::vector<double> nelder_mead_once(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0, int iterations) {
  const std::size_t n = x0.size();
  std::vector<std::vector<double>> simplex{x0};
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> x = x0;
    x[i] += 0.3;
    simplex.push_back(x);
  }
  std::vector<double> values;
  for (const auto& x : simplex) values.push_back(f(x));
  std::vector<std::size_t> order(n + 1);
  for (int it = 0; it < iterations; ++it) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    const std::size_t best = order[0], worst = order[n], second = order[n - 1];
    if (std::abs(values[worst] - values[best]) <= 1e-9 * (std::abs(values[best]) + 1e-12)) break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) centroid[j] += simplex[order[i]][j] / static_cast<double>(n);
    }
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (std::size_t j = 0; j < n; ++j) x[j] = centroid[j] + t * (simplex[worst][j] - centroid[j]);
      return x;
    };
    const auto reflected = along(-1);
    const double fr = f(reflected);
    if (fr < values[best]) {
      const auto expanded = along(-2);
      const double fe = f(expanded);
      if (fe < fr) {
        simplex[worst] = expanded;
        values[worst] = fe;
      } else {
        simplex[worst] = reflected;
        values[worst] = fr;
      }
    } else if (fr < values[second]) {
      simplex[worst] = reflected;
      values[worst] = fr;
    } else {
      const auto contracted = along(0.5);
      const double fc = f(contracted);
      if (fc < values[worst]) {
        simplex[worst] = contracted;
        values[worst] = fc;
      } else {
        for (std::size_t i = 1; i <= n; ++i) {
          auto& x = simplex[order[i]];
          for (std::size_t j = 0; j < n; ++j) x[j] = simplex[best][j] + 0.5 * (x[j] - simplex[best][j]);
          values[order[i]] = f(x);
        }
      }
    }
  }
  return simplex[static_cast<std::size_t>(std::min_element(values.begin(), values.end()) - values.begin())];
}

// Restarted from its result until a restart no longer helps: a simplex can collapse before the minimum.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x, int iterations) {
  double best = f(x);
  for (int round = 0; round < 6; ++round) {
    x = nelder_mead_once(f, x, iterations);
    const double now = f(x);
    if (now >= best * (1 - 1e-6)) break;
    best = now;
  }
  return x;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double logit(double p) { return std::log(p / (1 - p)); }

// Mean soft-L1 of log(predicted / measured) over `rows`, with `constants` in place.
double loss(const GpuType& gpu, Dtype dtype, const std::vector<const MeasuredKernel*>& rows, const std::shared_ptr<const KernelConstants>& constants) {
  const KernelModel model(gpu, constants);
  double sum = 0;
  constexpr double scale = 0.05;
  for (const MeasuredKernel* m : rows) {
    const double r = std::log(estimate_measured(model, *m, dtype).time_s() / m->time_s) / scale;
    sum += 2 * (std::sqrt(1 + r * r) - 1);
  }
  return sum / static_cast<double>(rows.size());
}

}  // namespace

std::shared_ptr<const KernelConstants> fit_kernel_constants(const GpuType& gpu, Dtype dtype, const std::vector<MeasuredKernel>& measured,
                                                            const KernelConstants& base, const std::string& source) {
  auto fitted = std::make_shared<KernelConstants>(base);
  KernelArchConstants& arch = fitted->of(gpu.arch);
  auto rows_of = [&](KernelClass cls, AttentionBackend backend = AttentionBackend::flash2) {
    std::vector<const MeasuredKernel*> rows;
    for (const MeasuredKernel& m : measured) {
      if (m.call.cls == cls && (cls != KernelClass::attention || m.call.backend == backend)) rows.push_back(&m);
    }
    return rows;
  };
  const auto cudnn_rows = rows_of(KernelClass::attention, AttentionBackend::cudnn);
  if (cudnn_rows.size() < measured.size()) {
    arch.source = source;
    // Fitted on this GPU now: its shares are its own (carried to others of its architecture from it), no longer borrowed.
    arch.borrowed.clear();
    arch.fitted_on = Catalog::builtin().gpu(gpu.id) != nullptr ? gpu.id : "";
  }
  // GEMM: the tiles' efficiency falls with their area from the largest's (fewer operands reused per
  // byte loaded): e = e_max x (area / largest area)^g; then the K overhead, the memory efficiency
  // (0..1.5) and the fixed cost.
  if (const auto rows = rows_of(KernelClass::gemm); !rows.empty()) {
    double largest = 0;
    for (const auto& t : fitted->tiles) largest = std::max(largest, t[0] * t[1]);
    auto apply = [&](const std::vector<double>& x, KernelArchConstants& a) {
      for (std::size_t t = 0; t < fitted->tiles.size(); ++t) {
        a.tile_efficiency[t] = sigmoid(x[0]) * std::pow(fitted->tiles[t][0] * fitted->tiles[t][1] / largest, std::exp(x[1]));
      }
      a.k_overhead = std::exp(x[2]) - 1;
      a.gemm_memory_efficiency = 1.5 * sigmoid(x[3]);
      a.gemm_fixed_us = std::exp(x[4]) - 0.1;
    };
    const std::vector<double> x0{logit(std::clamp(arch.tile_efficiency.front(), 0.01, 0.99)), std::log(0.2), std::log(arch.k_overhead + 1),
                                 logit(std::clamp(arch.gemm_memory_efficiency / 1.5, 0.01, 0.99)), std::log(arch.gemm_fixed_us + 0.1)};
    const auto x = nelder_mead(
        [&](const std::vector<double>& v) {
          auto trial = std::make_shared<KernelConstants>(*fitted);
          apply(v, trial->of(gpu.arch));
          return loss(gpu, dtype, rows, trial);
        },
        x0, 3000);
    apply(x, arch);
  }
  // Each memory-bound class with rows: efficiency (0..1.5), fixed cost, a row's bandwidth, rows per SM,
  // the L2 speed-up (>= 1).
  for (std::size_t c = 0; c < kMemoryKernelClasses; ++c) {
    const auto cls = static_cast<KernelClass>(c + static_cast<std::size_t>(KernelClass::norm));
    const auto rows = rows_of(cls);
    if (rows.empty()) continue;
    auto apply = [](const std::vector<double>& x, MemoryKernelConstants& m) {
      m.efficiency = 1.5 * sigmoid(x[0]);
      m.fixed_us = std::exp(x[1]) - 0.1;
      m.row_GBps = std::exp(x[2]);
      m.rows_per_sm = std::exp(x[3]);
      m.l2_speedup = 1 + std::exp(x[4]);
    };
    const MemoryKernelConstants& m0 = arch.memory[c];
    const std::vector<double> x0{logit(std::clamp(m0.efficiency / 1.5, 0.01, 0.99)), std::log(m0.fixed_us + 0.1),
                                 std::log(m0.row_GBps > 0 ? m0.row_GBps : 20.0), std::log(m0.rows_per_sm),
                                 std::log(std::max(m0.l2_speedup - 1, 0.05))};
    const auto x = nelder_mead(
        [&](const std::vector<double>& v) {
          auto trial = std::make_shared<KernelConstants>(*fitted);
          apply(v, trial->of(gpu.arch).memory[c]);
          return loss(gpu, dtype, rows, trial);
        },
        x0, 1500);
    apply(x, arch.memory[c]);
  }
  // Attention, each backend's to its rows: the share of peak (0..1), the key overhead of a query block and the
  // softmax's per-key work in head-dimension units (held where every row has one head dimension: the rows cannot
  // tell it from the share); the fixed cost stays. FlashAttention-2's rows that time a causal forward and backward
  // together also fit the causal backward's rate, against the non-causal backward's held where it is: passes timed
  // together cannot tell the forward's level from both backward rates at once.
  const auto fit_attention = [&](const std::vector<const MeasuredKernel*>& rows, AttentionBackend backend) {
    const auto constants_of = [backend](KernelArchConstants& a) -> AttentionConstants& {
      if (backend == AttentionBackend::flash2) return a.attention;
      if (!a.cudnn_attention) a.cudnn_attention = a.attention;  // FlashAttention-2's as the start
      return *a.cudnn_attention;
    };
    const bool causal_backward = backend == AttentionBackend::flash2 &&
                                 std::any_of(rows.begin(), rows.end(), [](const MeasuredKernel* m) { return m->with_backward && m->call.causal; });
    const bool one_head_dim = std::all_of(rows.begin(), rows.end(), [&](const MeasuredKernel* m) { return m->call.k == rows.front()->call.k; });
    if (causal_backward && arch.attention_backward_rate <= 0) arch.attention_backward_rate = fitted->attention_backward_rate;
    const double causal_rate = arch.attention_backward_rate_causal > 0 ? arch.attention_backward_rate_causal : fitted->attention_backward_rate_causal;
    const AttentionConstants start = constants_of(arch);
    auto apply = [&](const std::vector<double>& x, KernelArchConstants& a) {
      AttentionConstants& c = constants_of(a);
      c.efficiency = sigmoid(x[0]);
      c.key_overhead = std::exp(x[1]) - 1;
      if (!one_head_dim) c.head_overhead = std::exp(x[2]) - 1;
      if (causal_backward) a.attention_backward_rate_causal = std::clamp(std::exp(x.back()), 1e-3, 10.0);  // what a constants file may hold
    };
    std::vector<double> x0{logit(std::clamp(start.efficiency, 0.01, 0.99)), std::log(start.key_overhead + 1)};
    if (!one_head_dim) x0.push_back(std::log(start.head_overhead + 1));
    if (causal_backward) x0.push_back(std::log(causal_rate));
    const auto x = nelder_mead(
        [&](const std::vector<double>& v) {
          auto trial = std::make_shared<KernelConstants>(*fitted);
          apply(v, trial->of(gpu.arch));
          return loss(gpu, dtype, rows, trial);
        },
        x0, 1500);
    apply(x, arch);
  };
  if (const auto rows = rows_of(KernelClass::attention); !rows.empty()) fit_attention(rows, AttentionBackend::flash2);
  if (!cudnn_rows.empty()) {
    fit_attention(cudnn_rows, AttentionBackend::cudnn);
    arch.cudnn_attention_source = source;
  }
  return fitted;
}

}  // namespace fleetsim
