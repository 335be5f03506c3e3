#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

struct Spread {
  std::size_t n = 0;
  double median = 0, p90 = 0, worst = 0, bias = 0;  // |error| quantiles; worst signed; bias: median signed error
};

Spread spread(std::vector<double> errors) {
  Spread s;
  s.n = errors.size();
  if (errors.empty()) return s;
  std::vector<double> a;
  for (double e : errors) {
    a.push_back(std::abs(e));
    if (std::abs(e) > std::abs(s.worst)) s.worst = e;
  }
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.median = quantile(a, 0.5);
  s.p90 = quantile(a, 0.9);
  s.bias = quantile(errors, 0.5);
  return s;
}

// The label's last part ("Llama-2-7b/tp1/mlp_up_proj" -> "mlp_up_proj"): the operation across models.
std::string operation(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

}  // namespace

void write_kernel_estimate(std::ostream& out, const GpuType& gpu, const KernelCall& call, Dtype dtype, const KernelEstimate& e,
                           const std::vector<std::string>& notes) {
  out << "# fleetsim kernels: " << kernel_class_name(call.cls) << " on " << gpu.id << " (" << gpu.name << "), " << dtype_name(dtype) << "\n";
  for (const std::string& n : notes) out << "# " << n << "\n";
  char line[200];
  std::snprintf(line, sizeof line, "m %.0f  n %.0f  k %.0f\n", call.m, call.n, call.k);
  out << line;
  out << "time      " << format_quantity(e.time_s(), Dimension::time) << " (" << (e.memory_bound() ? "memory" : "compute") << "-bound)\n"
      << "compute   " << format_quantity(e.compute_s, Dimension::time) << "\n"
      << "memory    " << format_quantity(e.memory_s, Dimension::time) << "\n"
      << "fixed     " << format_quantity(e.fixed_s, Dimension::time) << "\n";
  if (call.cls == KernelClass::gemm && e.time_s() > 0) {
    out << "achieved  " << format_quantity(2 * call.m * call.n * call.k * call.batch / e.time_s(), Dimension::flop_rate) << " of "
        << format_quantity(gpu.peak_for(dtype), Dimension::flop_rate) << " peak\n";
  }
}

void write_kernel_comparison(std::ostream& out, const GpuType& gpu, const std::vector<MeasuredKernel>& measured,
                             const std::vector<KernelEstimate>& predicted, const std::vector<std::string>& notes) {
  out << "# fleetsim kernels: " << measured.size() << " measured kernels on " << gpu.id << " (" << gpu.name << ")\n";
  for (const std::string& n : notes) out << "# " << n << "\n";
  out << "# error: (predicted - measured) / measured; bias: the median signed error\n#\n";
  std::map<std::string, std::vector<double>> by_class, by_operation;
  std::vector<double> all;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double e = (predicted[i].time_s() - measured[i].time_s) / measured[i].time_s;
    by_class[std::string(kernel_class_name(measured[i].call.cls))].push_back(e);
    by_operation[operation(measured[i].name)].push_back(e);
    all.push_back(e);
  }
  char line[200];
  auto table = [&](const char* title, const std::map<std::string, std::vector<double>>& groups) {
    std::snprintf(line, sizeof line, "%-24s %6s %9s %9s %9s %9s\n", title, "rows", "median", "p90", "bias", "worst");
    out << line;
    for (const auto& [key, errors] : groups) {
      const Spread s = spread(errors);
      std::snprintf(line, sizeof line, "%-24s %6zu %8.1f%% %8.1f%% %+8.1f%% %+8.1f%%\n", key.c_str(), s.n, 100 * s.median, 100 * s.p90,
                    100 * s.bias, 100 * s.worst);
      out << line;
    }
  };
  table("class", by_class);
  out << "\n";
  table("operation", by_operation);
  const Spread s = spread(all);
  std::snprintf(line, sizeof line, "\n# median |error| %.1f%% over %zu kernels; p90 %.1f%%\n", 100 * s.median, s.n, 100 * s.p90);
  out << line;
}

std::string kernel_comparison_json(const GpuType& gpu, const std::vector<MeasuredKernel>& measured, const std::vector<KernelEstimate>& predicted,
                                   const std::vector<std::string>& notes) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::map<std::string, std::vector<double>> by_class;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double e = (predicted[i].time_s() - measured[i].time_s) / measured[i].time_s;
    by_class[std::string(kernel_class_name(measured[i].call.cls))].push_back(e);
    rows.push_back({{"name", measured[i].name}, {"kernel", kernel_class_name(measured[i].call.cls)}, {"m", measured[i].call.m},
                    {"n", measured[i].call.n}, {"k", measured[i].call.k}, {"measured_s", measured[i].time_s},
                    {"time_s", predicted[i].time_s()}, {"memory_bound", predicted[i].memory_bound()}, {"error", e}});
  }
  nlohmann::ordered_json classes = nlohmann::ordered_json::object();
  for (const auto& [key, errors] : by_class) {
    const Spread s = spread(errors);
    classes[key] = {{"rows", s.n}, {"median_abs_error", s.median}, {"p90_abs_error", s.p90}, {"median_error", s.bias}, {"worst_error", s.worst}};
  }
  nlohmann::ordered_json doc{{"gpu", gpu.id}, {"notes", notes}, {"classes", classes}, {"rows", rows}};
  return doc.dump(1) + "\n";
}

std::string kernel_estimate_json(const GpuType& gpu, const KernelCall& call, Dtype dtype, const KernelEstimate& e) {
  nlohmann::ordered_json doc{{"gpu", gpu.id}, {"kernel", kernel_class_name(call.cls)}, {"dtype", dtype_name(dtype)},
                             {"m", call.m}, {"n", call.n}, {"k", call.k}, {"time_s", e.time_s()}, {"compute_s", e.compute_s},
                             {"memory_s", e.memory_s}, {"fixed_s", e.fixed_s}, {"memory_bound", e.memory_bound()}};
  return doc.dump(2) + "\n";
}

}  // namespace fleetsim
