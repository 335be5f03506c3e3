#include <cstdio>
#include <nlohmann/json.hpp>

#include "fleetsim/model_profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {

void write_catalog_text(std::ostream& out, const Catalog& c) {
  char line[256];
  out << "GPU types\n";
  std::snprintf(line, sizeof line, "  %-15s %-34s %-9s %9s %11s %13s %13s %7s %7s\n", "id", "name", "arch", "VRAM", "HBM BW",
                "BF16 dense", "FP8 dense", "TDP", "$/h");
  out << line;
  for (const auto& [id, g] : c.gpus()) {
    const double fp8 = g.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp8)];
    std::snprintf(line, sizeof line, "  %-15s %-34.34s %-9s %9s %11s %13s %13s %7s %7.2f\n", id.c_str(), g.name.c_str(),
                  g.arch == GpuArch::unknown ? "-" : std::string(gpu_arch_name(g.arch)).c_str(),
                  format_quantity(g.vram_bytes, Dimension::bytes).c_str(),
                  format_quantity(g.memory_bandwidth_Bps, Dimension::bandwidth).c_str(),
                  format_quantity(g.peak_for(Dtype::bf16), Dimension::flop_rate).c_str(),
                  fp8 > 0 ? format_quantity(fp8, Dimension::flop_rate).c_str() : "-",
                  format_quantity(g.tdp_w, Dimension::power).c_str(), g.price_usd_per_hour);
    out << line;
  }
  out << "\nNode types\n";
  std::snprintf(line, sizeof line, "  %-15s %-13s %5s %-10s %-10s %-12s\n", "id", "gpu", "gpus", "gpu link", "host link", "nics");
  out << line;
  for (const auto& [id, n] : c.nodes()) {
    std::snprintf(line, sizeof line, "  %-15s %-13s %5d %-10s %-10s %d x %s\n", id.c_str(), n.gpu.c_str(), n.gpus,
                  n.gpu_link.c_str(), n.host_link.c_str(), n.nics, n.nic.c_str());
    out << line;
  }
  out << "\nLink types (bandwidth per direction)\n";
  for (const auto& [id, l] : c.links()) {
    std::snprintf(line, sizeof line, "  %-15s %-11s %11s %9s  %s\n", id.c_str(), std::string(link_kind_name(l.kind)).c_str(),
                  format_quantity(l.bandwidth_Bps, Dimension::bandwidth).c_str(),
                  format_quantity(l.latency_s, Dimension::time).c_str(), l.name.c_str());
    out << line;
  }
  out << "\nArchitectures (layer-level profiles; fleetsim kernels --model ID times a step)\n";
  for (const auto& [id, a] : c.architectures()) {
    std::snprintf(line, sizeof line, "  %-19s %-18s %s\n", id.c_str(), a->family.c_str(), a->name.c_str());
    out << line;
  }
  out << "\nModels: " << c.models().size() << ", operator profiles: " << c.operators().size()
      << " (fleetsim catalog --json lists them all, and each architecture's kernels at a reference shape)\n";
}

std::string catalog_json(const Catalog& c) {
  using nlohmann::ordered_json;
  ordered_json j;
  ordered_json gpus = ordered_json::object();
  for (const auto& [id, g] : c.gpus()) {
    ordered_json peaks = ordered_json::object();
    for (std::size_t d = 0; d < kDtypeCount; ++d) {
      if (g.peak_flop_per_s[d] > 0) peaks[std::string(dtype_name(static_cast<Dtype>(d)))] = g.peak_flop_per_s[d];
    }
    gpus[id] = {{"name", g.name}, {"arch", gpu_arch_name(g.arch)}, {"vram_bytes", g.vram_bytes}, {"memory_bandwidth_Bps", g.memory_bandwidth_Bps},
                {"peak_flop_per_s", peaks}, {"tdp_w", g.tdp_w}, {"idle_power_w", g.idle_power_w},
                {"launch_overhead_s", g.launch_overhead_s}, {"price_usd_per_hour", g.price_usd_per_hour},
                {"compute_and_memory", g.sequential_compute_and_memory ? "sequential" : "overlapped"},
                {"source", g.source}};
    if (const TrainingThroughput& t = g.training_throughput; t.of(TrainingPrecision::fp32) > 0) {
      const char* estimated = t.estimated[0] ? (t.estimated[1] ? "both" : "fp32") : (t.estimated[1] ? "mixed" : "none");
      gpus[id]["training_throughput"] = {{"fp32", t.of(TrainingPrecision::fp32)}, {"mixed", t.of(TrainingPrecision::mixed)},
                                         {"estimated", estimated}, {"source", t.source}};
    }
  }
  j["gpus"] = gpus;
  ordered_json links = ordered_json::object();
  for (const auto& [id, l] : c.links()) {
    links[id] = {{"name", l.name}, {"kind", link_kind_name(l.kind)}, {"bandwidth_Bps", l.bandwidth_Bps},
                 {"nccl_bandwidth_Bps", l.nccl_Bps()}, {"latency_s", l.latency_s}, {"source", l.source}};
  }
  j["links"] = links;
  ordered_json nodes = ordered_json::object();
  for (const auto& [id, n] : c.nodes()) {
    nodes[id] = {{"name", n.name}, {"gpu", n.gpu}, {"gpus", n.gpus}, {"gpu_link", n.gpu_link},
                 {"host_link", n.host_link}, {"nic", n.nic}, {"nics", n.nics},
                 {"host_memory_bytes", n.host_memory_bytes}, {"cpu", n.cpu == CpuVendor::amd ? "amd" : "intel"},
                 {"nvls", n.nvls}, {"source", n.source}};
    if (n.memory_bus_Bps > 0) nodes[id]["memory_bus_Bps"] = n.memory_bus_Bps;
    if (n.compute_pool_devices > 0) nodes[id]["compute_pool_devices"] = n.compute_pool_devices;
    if (n.host_memory_bandwidth_Bps > 0) nodes[id]["host_memory_bandwidth_Bps"] = n.host_memory_bandwidth_Bps;
  }
  j["nodes"] = nodes;
  ordered_json models = ordered_json::object();
  for (const auto& [id, m] : c.models()) {
    models[id] = {{"name", m.name}, {"weights_bytes", m.weights_bytes}, {"source", m.source}};
  }
  j["models"] = models;
  ordered_json ops = ordered_json::object();
  for (const auto& [id, o] : c.operators()) {
    ops[id] = {{"name", o.name}, {"flop", o.flop}, {"bytes", o.bytes}, {"dtype", dtype_name(o.dtype)}, {"source", o.source}};
  }
  j["operators"] = ops;
  ordered_json archs = ordered_json::object();
  for (const auto& [id, a] : c.architectures()) {
    ordered_json arch{{"name", a->name}, {"family", a->family}};
    for (const auto& [key, v] : a->numbers) arch[key] = v;
    for (const auto& [key, v] : a->lists) arch[key] = v;
    arch["source"] = a->source;
    const StepShape s = reference_shape(*a);
    const auto calls = step_kernels(*a, s, Dtype::bf16);
    ordered_json kernels = ordered_json::array();
    for (const KernelCall& k : calls) {
      ordered_json call{{"name", k.name}, {"class", kernel_class_name(k.cls)}, {"m", k.m}, {"n", k.n}};
      if (k.cls == KernelClass::gemm || k.cls == KernelClass::attention) call["k"] = k.k;
      if (k.batch != 1) call["batch"] = k.batch;
      if (k.taps != 1) call["taps"] = k.taps;
      if (k.causal) call["causal"] = true;
      if (k.count != 1) call["count"] = k.count;
      if (k.element_bytes > 0) call["element_bytes"] = k.element_bytes;
      kernels.push_back(std::move(call));
    }
    arch["profile"] = {{"shape", {{"batch", s.batch}, {"width", s.width}, {"height", s.height}, {"frames", s.frames}, {"tokens", s.tokens}, {"context", s.context}}},
                       {"runtime", runtime_name(s.runtime)},
                       {"dtype", "bf16"},
                       {"flop", kernels_flop(calls)},
                       {"kernels", kernels}};
    archs[id] = std::move(arch);
  }
  j["architectures"] = archs;
  return j.dump(2) + "\n";
}

}  // namespace fleetsim
