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
    rows.push_back({{"name", measured[i].name}, {"kernel", kernel_class_name(measured[i].call.cls)}, {"causal", measured[i].call.causal}, {"with_backward", measured[i].with_backward}, {"m", measured[i].call.m},
                    {"n", measured[i].call.n}, {"k", measured[i].call.k}, {"measured_s", measured[i].time_s},
                    {"time_s", predicted[i].time_s()}, {"memory_bound", predicted[i].memory_bound()}, {"error", e}});
    if (measured[i].call.cls == KernelClass::attention) rows.back()["backend"] = attention_backend_name(measured[i].call.backend);
  }
  nlohmann::ordered_json classes = nlohmann::ordered_json::object();
  for (const auto& [key, errors] : by_class) {
    const Spread s = spread(errors);
    classes[key] = {{"rows", s.n}, {"median_abs_error", s.median}, {"p90_abs_error", s.p90}, {"median_error", s.bias}, {"worst_error", s.worst}};
  }
  nlohmann::ordered_json doc{{"gpu", gpu.id}, {"notes", notes}, {"classes", classes}, {"rows", rows}};
  return doc.dump(1) + "\n";
}

namespace {

// Where a step's time goes, by kernel class and by layer (the kernel name's first part).
struct StepTotals {
  std::map<std::string, std::pair<double, int>> by_class, by_layer;  // time, calls
};

StepTotals totals(const StepEstimate& step) {
  StepTotals t;
  for (std::size_t i = 0; i < step.calls.size(); ++i) {
    const KernelCall& call = step.calls[i];
    const double time = step.kernels[i].time_s() * call.count;
    auto& c = t.by_class[std::string(kernel_class_name(call.cls))];
    c.first += time;
    c.second += static_cast<int>(call.count);
    auto& l = t.by_layer[call.name.substr(0, call.name.find('.'))];
    l.first += time;
    l.second += static_cast<int>(call.count);
  }
  if (step.host_wait_s > 0) t.by_class["(waiting for the host)"] = {step.host_wait_s, 0};
  return t;
}

// The step's kernels by what launched them: each runtime kernel (models/runtimes.json) of each small
// operation, and the model's own GEMMs, attentions and other kernels by class; in order of first launch.
struct OperationRow {
  const RuntimeKernel* origin = nullptr;
  KernelClass cls = KernelClass::gemm;
  double kernels = 0, bytes = 0, time_s = 0;
};
std::vector<OperationRow> operations(const StepEstimate& step, Dtype dtype) {
  std::vector<OperationRow> rows;
  for (std::size_t i = 0; i < step.calls.size(); ++i) {
    const KernelCall& call = step.calls[i];
    auto it = std::find_if(rows.begin(), rows.end(), [&](const OperationRow& r) { return r.origin == call.origin && (call.origin != nullptr || r.cls == call.cls); });
    if (it == rows.end()) it = rows.insert(rows.end(), OperationRow{.origin = call.origin, .cls = call.cls});
    it->kernels += call.count;
    it->bytes += call.count * kernel_bytes(call, dtype);
    it->time_s += call.count * step.kernels[i].time_s();
  }
  return rows;
}

// "bf16+fp32": a runtime kernel's tensors with the step's dtype for "act".
std::string dtypes_text(std::string text, Dtype dtype) {
  for (std::size_t at; (at = text.find("act")) != std::string::npos;) text.replace(at, 3, dtype_name(dtype));
  return text;
}

double kernel_count(const StepEstimate& step) {
  double n = 0;
  for (const KernelCall& c : step.calls) n += c.count;
  return n;
}

std::string shape_text(const StepShape& s) {
  char text[320];
  std::snprintf(text, sizeof text, "batch %g, %gx%g pixels, %g frames, %g tokens, context %g", s.batch, s.width, s.height, s.frames, s.tokens, s.context);
  std::string out = text;
  if (s.tiles.size > 0 && s.tiles.frames > 0) {
    std::snprintf(text, sizeof text, ", in tiles of %g latent pixels (overlap %g) and %g latent frames (overlap %g)", s.tiles.size, s.tiles.overlap,
                  s.tiles.frames, s.tiles.frame_overlap);
    out += text;
  } else if (s.tiles.size > 0) {  // a 2D VAE's
    std::snprintf(text, sizeof text, ", in three passes of tiles of %g latent pixels (overlap %g)", s.tiles.size, s.tiles.overlap);
    out += text;
  }
  if (s.gpus() > 1) {
    std::snprintf(text, sizeof text, "; one GPU of %g (sequence %g, ring %g, cfg %g, pipefusion %g, patches %g)", s.gpus(), s.sequence_parallel, s.ring_degree,
                  s.cfg_parallel, s.pipeline_stages, s.patches);
    out += text;
  }
  return out + "; " + std::string(runtime_name(s.runtime)) + (s.attention == AttentionBackend::cudnn ? ", cuDNN attention" : "");
}

}  // namespace

void write_model_step(std::ostream& out, const GpuType& gpu, const Architecture& arch, const StepShape& shape, Dtype dtype, const StepEstimate& step,
                      const std::vector<std::string>& notes) {
  const StepTotals t = totals(step);
  const double flop = kernels_flop(step.calls);
  out << "# fleetsim kernels: one step of " << arch.id << " (" << arch.name << ") on " << gpu.id << ", " << dtype_name(dtype) << "\n";
  out << "# " << shape_text(shape) << "\n";
  for (const std::string& n : notes) out << "# " << n << "\n";
  char line[200];
  std::snprintf(line, sizeof line, "time      %s (%.0f kernels)\n", format_quantity(step.time_s, Dimension::time).c_str(), kernel_count(step));
  out << line;
  out << "FLOP      " << format_quantity(flop, Dimension::flop) << ", achieved " << format_quantity(step.time_s > 0 ? flop / step.time_s : 0, Dimension::flop_rate)
      << " of " << format_quantity(gpu.peak_for(dtype), Dimension::flop_rate) << " peak\n";
  out << "bound     compute " << format_quantity(step.compute_bound_s, Dimension::time) << ", memory " << format_quantity(step.memory_bound_s, Dimension::time)
      << ", fixed costs " << format_quantity(step.fixed_s, Dimension::time) << ", waiting for the host " << format_quantity(step.host_wait_s, Dimension::time)
      << "\n\n";
  auto table = [&](const char* title, const std::map<std::string, std::pair<double, int>>& rows) {
    std::snprintf(line, sizeof line, "%-24s %8s %12s %7s\n", title, "kernels", "time", "share");
    out << line;
    std::vector<std::pair<std::string, std::pair<double, int>>> sorted(rows.begin(), rows.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (const auto& [key, v] : sorted) {
      std::snprintf(line, sizeof line, "%-24s %8d %12s %6.1f%%\n", key.c_str(), v.second, format_quantity(v.first, Dimension::time).c_str(),
                    step.time_s > 0 ? 100 * v.first / step.time_s : 0.0);
      out << line;
    }
  };
  table("kernel class", t.by_class);
  out << "\n";
  table("layer", t.by_layer);
  out << "\noperations, in launch order (small operations as " << runtime_profile(shape.runtime).name << " runs them: models/runtimes.json)\n";
  std::snprintf(line, sizeof line, "%-22s %-44s %-17s %-18s %8s %10s %10s\n", "operation", "kernel", "class", "reads -> writes", "kernels", "bytes", "time");
  out << line;
  const std::vector<OperationRow> rows = operations(step, dtype);
  for (const OperationRow& r : rows) {
    const bool model_kernel = r.origin == nullptr;
    const std::string operation = model_kernel ? "(model)" : r.origin->operation;
    const std::string kernel = model_kernel ? std::string(kernel_class_name(r.cls)) : r.origin->op.substr(0, 44);
    const std::string tensors = model_kernel || r.origin->launches > 0 ? "" : dtypes_text(r.origin->reads + " -> " + r.origin->writes, dtype);
    std::snprintf(line, sizeof line, "%-22s %-44s %-17s %-18s %8.0f %10s %10s\n", operation.c_str(), kernel.c_str(),
                  model_kernel || r.origin->launches > 0 ? (model_kernel ? "" : "launch") : std::string(kernel_class_name(r.origin->cls)).c_str(),
                  tensors.c_str(), r.kernels, format_quantity(r.bytes, Dimension::bytes).c_str(), format_quantity(r.time_s, Dimension::time).c_str());
    out << line;
  }
  out << "\nsources of the operations (" << runtime_profile(shape.runtime).source << ")\n";
  std::vector<std::string> seen;
  for (const OperationRow& r : rows) {
    if (r.origin == nullptr || std::find(seen.begin(), seen.end(), r.origin->operation) != seen.end()) continue;
    seen.push_back(r.origin->operation);
    out << "  " << r.origin->operation << ": " << r.origin->source << "\n";
  }
  if (arch.family == "dit") {  // how the runtime holds a diffusion transformer's attention projections
    const RuntimeProfile& runtime = runtime_profile(shape.runtime);
    out << "  projections (" << (runtime.separate_projections ? "separate" : "fused") << "): " << runtime.projections_source << "\n";
  }
}

std::string model_step_json(const GpuType& gpu, const Architecture& arch, const StepShape& shape, Dtype dtype, const StepEstimate& step) {
  const StepTotals t = totals(step);
  nlohmann::ordered_json classes = nlohmann::ordered_json::object();
  for (const auto& [key, v] : t.by_class) classes[key] = {{"time_s", v.first}, {"kernels", v.second}};
  nlohmann::ordered_json doc{{"gpu", gpu.id},
                             {"architecture", arch.id},
                             {"dtype", dtype_name(dtype)},
                             {"runtime", runtime_name(shape.runtime)},
                             {"attention", attention_backend_name(shape.attention)},
                             {"shape", {{"batch", shape.batch}, {"width", shape.width}, {"height", shape.height}, {"frames", shape.frames}, {"tokens", shape.tokens}, {"context", shape.context},
                                        {"tiles", shape.tiles.size > 0 ? nlohmann::ordered_json{{"size", shape.tiles.size}, {"overlap", shape.tiles.overlap},
                                                                                              {"frames", shape.tiles.frames}, {"frame_overlap", shape.tiles.frame_overlap}}
                                                                       : nlohmann::ordered_json()}}},
                             {"time_s", step.time_s},
                             {"flop", kernels_flop(step.calls)},
                             {"kernels", kernel_count(step)},
                             {"compute_bound_s", step.compute_bound_s},
                             {"memory_bound_s", step.memory_bound_s},
                             {"fixed_s", step.fixed_s},
                             {"host_wait_s", step.host_wait_s},
                             {"classes", classes}};
  if (shape.gpus() > 1) {  // one GPU's share of a parallel step
    doc["shape"]["parallel"] = {{"gpus", shape.gpus()}, {"sequence", shape.sequence_parallel}, {"ring", shape.ring_degree}, {"cfg", shape.cfg_parallel},
                                {"pipefusion", shape.pipeline_stages}, {"patches", shape.patches}};
  }
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const OperationRow& r : operations(step, dtype)) {
    nlohmann::ordered_json row;
    if (r.origin == nullptr) {
      row = {{"operation", "(model)"}, {"class", kernel_class_name(r.cls)}};
    } else {
      row = {{"operation", r.origin->operation}, {"kernel", r.origin->op}};
      if (r.origin->launches > 0) {
        row["class"] = "launch";
      } else {
        row["class"] = kernel_class_name(r.origin->cls);
        row["reads"] = dtypes_text(r.origin->reads, dtype);
        row["writes"] = dtypes_text(r.origin->writes, dtype);
      }
      row["source"] = r.origin->source;
    }
    row["kernels"] = r.kernels;
    row["bytes"] = r.bytes;
    row["time_s"] = r.time_s;
    ops.push_back(std::move(row));
  }
  doc["operations"] = std::move(ops);
  return doc.dump(2) + "\n";
}

std::string kernel_estimate_json(const GpuType& gpu, const KernelCall& call, Dtype dtype, const KernelEstimate& e) {
  nlohmann::ordered_json doc{{"gpu", gpu.id}, {"kernel", kernel_class_name(call.cls)}, {"dtype", dtype_name(dtype)},
                             {"m", call.m}, {"n", call.n}, {"k", call.k}, {"time_s", e.time_s()}, {"compute_s", e.compute_s},
                             {"memory_s", e.memory_s}, {"fixed_s", e.fixed_s}, {"memory_bound", e.memory_bound()}};
  return doc.dump(2) + "\n";
}

}  // namespace fleetsim
