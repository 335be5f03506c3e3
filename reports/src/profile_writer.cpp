#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

// Six significant digits in the base unit: exact enough to read back, and still a quantity.
std::string quantity(double value, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g %s", value, unit);
  return buf;
}

// GEMMs sized in FLOP: every worker's, one worker's alone and beside streams.
bool gemm_of_flop(const Measurement& m) { return m.kernel == "gemm" || m.kernel == "gemm-alone" || m.kernel == "gemm-beside-stream"; }

// What a measurement achieved, in the unit its kernel is judged by.
std::string achieved(const Measurement& m) {
  if (gemm_of_flop(m)) return format_quantity(m.size / m.seconds, Dimension::flop_rate);
  if (m.kernel == "launch") return std::string("-");
  if (m.kernel == "gemm-square") return format_quantity(2 * m.size * m.size * m.size / m.seconds, Dimension::flop_rate);
  return format_quantity(m.size / m.seconds, Dimension::bandwidth);
}

}  // namespace

std::string profile_json(const Profile& p) {
  using nlohmann::ordered_json;
  ordered_json provenance = ordered_json::object();
  for (const auto& [key, value] : p.provenance) provenance[key] = value;
  ordered_json gpus = ordered_json::object();
  for (const GpuCalibration& g : p.gpus) {
    ordered_json entry = ordered_json::object(), peaks = ordered_json::object();
    for (std::size_t d = 0; d < kDtypeCount; ++d) {
      if (g.peak_flop_per_s[d]) peaks[std::string(dtype_name(static_cast<Dtype>(d)))] = quantity(*g.peak_flop_per_s[d], "FLOP/s");
    }
    if (!peaks.empty()) entry["peak_flops"] = peaks;
    if (g.memory_bandwidth_Bps) entry["memory_bandwidth"] = quantity(*g.memory_bandwidth_Bps, "B/s");
    if (g.launch_overhead_s) entry["launch_overhead"] = quantity(*g.launch_overhead_s, "s");
    if (g.kernel_compute_scale) entry["kernel_compute_scale"] = *g.kernel_compute_scale;
    if (g.kernel_memory_scale) entry["kernel_memory_scale"] = *g.kernel_memory_scale;
    if (g.shared_memory_bandwidth_Bps) entry["shared_memory_bandwidth"] = quantity(*g.shared_memory_bandwidth_Bps, "B/s");
    if (g.compute_pool_devices) entry["compute_pool"] = *g.compute_pool_devices;
    gpus[g.id] = entry;
  }
  ordered_json links = ordered_json::object();
  for (const LinkCalibration& l : p.links) {
    ordered_json entry = ordered_json::object();
    if (l.bandwidth_Bps) entry["bandwidth"] = quantity(*l.bandwidth_Bps, "B/s");
    if (l.latency_s) entry["latency"] = quantity(*l.latency_s, "s");
    if (l.collective_latency_scale) entry["collective_latency_scale"] = *l.collective_latency_scale;
    if (l.collective_bandwidth_scale) entry["collective_bandwidth_scale"] = *l.collective_bandwidth_scale;
    links[l.id] = entry;
  }
  ordered_json points = ordered_json::array();
  for (const Measurement& m : p.measurements) {
    ordered_json point{{"kernel", m.kernel}, {"dtype", dtype_name(m.dtype)}, {"size", m.size}, {"seconds", m.seconds}};
    if (!m.devices.empty()) point["devices"] = m.devices;
    if (m.spread > 0) point["spread"] = m.spread;
    points.push_back(point);
  }
  ordered_json doc{{"fleetsim_profile", 1}, {"provenance", provenance}, {"gpus", gpus}, {"links", links}, {"measurements", points}};
  return doc.dump(1) + "\n";
}

void write_profile_text(std::ostream& out, const Profile& p) {
  for (const auto& [key, value] : p.provenance) out << key << std::string(key.size() < 10 ? 10 - key.size() : 1, ' ') << value << '\n';
  out << "\nkernel               dtype   size          time        spread  achieved\n";
  char line[160];
  for (const Measurement& m : p.measurements) {
    const std::string size = m.kernel == "launch"    ? std::string("-")
                             : m.kernel == "gemm-square" ? std::to_string(static_cast<int>(m.size)) + "^3"
                             : gemm_of_flop(m)         ? format_quantity(m.size, Dimension::flop)
                                                       : format_quantity(m.size, Dimension::bytes);
    char spread[16] = "-";
    if (m.spread > 0) std::snprintf(spread, sizeof spread, "%.1f%%", 100 * m.spread);
    std::snprintf(line, sizeof line, "%-20s %-7s %-13s %-11s %-7s %s", m.kernel.c_str(), std::string(dtype_name(m.dtype)).c_str(), size.c_str(),
                  format_quantity(m.seconds, Dimension::time).c_str(), spread, achieved(m).c_str());
    out << line << (m.devices.empty() ? "" : "  " + m.devices) << '\n';
  }
  out << "\nfitted (time = fixed cost + size / rate)\n";
  for (const GpuCalibration& g : p.gpus) {
    out << "  " << g.id << ":";
    for (std::size_t d = 0; d < kDtypeCount; ++d) {
      if (g.peak_flop_per_s[d]) out << ' ' << dtype_name(static_cast<Dtype>(d)) << ' ' << format_quantity(*g.peak_flop_per_s[d], Dimension::flop_rate);
    }
    if (g.memory_bandwidth_Bps) out << ", memory " << format_quantity(*g.memory_bandwidth_Bps, Dimension::bandwidth);
    if (g.launch_overhead_s) out << ", launch " << format_quantity(*g.launch_overhead_s, Dimension::time);
    if (g.kernel_compute_scale) out << ", kernel model's compute x" << *g.kernel_compute_scale;
    if (g.kernel_memory_scale) out << ", kernel model's memory x" << *g.kernel_memory_scale;
    if (g.shared_memory_bandwidth_Bps) out << ", shared by a node's devices " << format_quantity(*g.shared_memory_bandwidth_Bps, Dimension::bandwidth);
    if (g.compute_pool_devices) out << ", computing together as " << format_number(*g.compute_pool_devices) << " devices";
    out << '\n';
  }
  // How one worker's GEMM goes beside its neighbours: the pool is fitted to it alone and beside GEMMs;
  // beside streams, which draw little compute, the model gives it its rate alone.
  const auto rate_of = [&](std::string_view kernel, Dtype dtype, double size) -> std::optional<double> {
    for (const Measurement& m : p.measurements) {
      if (m.kernel == kernel && m.dtype == dtype && m.size == size) return m.size / m.seconds;
    }
    return std::nullopt;
  };
  for (const Measurement& m : p.measurements) {
    if (m.kernel != "gemm-alone") continue;
    const auto beside_gemms = rate_of("gemm", m.dtype, m.size);
    if (!beside_gemms) continue;
    out << "  one worker's " << dtype_name(m.dtype) << " GEMM alone " << format_quantity(m.size / m.seconds, Dimension::flop_rate);
    if (const auto beside_streams = rate_of("gemm-beside-stream", m.dtype, m.size)) {
      out << ", beside streams " << format_quantity(*beside_streams, Dimension::flop_rate);
    }
    out << ", beside GEMMs " << format_quantity(*beside_gemms, Dimension::flop_rate) << '\n';
  }
  for (const LinkCalibration& l : p.links) {
    out << "  " << l.id << ":";
    if (l.bandwidth_Bps) out << ' ' << format_quantity(*l.bandwidth_Bps, Dimension::bandwidth);
    if (l.latency_s) out << ", latency " << format_quantity(*l.latency_s, Dimension::time);
    if (l.collective_latency_scale) out << " collectives: latency x" << *l.collective_latency_scale;
    if (l.collective_bandwidth_scale) out << ", bandwidth x" << *l.collective_bandwidth_scale;
    out << '\n';
  }
}

void write_nccl_tests_fit_text(std::ostream& out, const NcclTestsLog& log, CollectiveOp op, const NcclTestsFit& fit) {
  out << log.file << ": " << collective_op_name(op) << " on " << log.ranks << " ranks";
  if (!log.device.empty()) out << " (" << log.device << ")";
  out << ", " << log.rows.size() << " sizes\n\n";
  out << "        size   measured     fitted   error   busbw measured   busbw fitted\n";
  char line[160];
  for (const NcclTestsFitRow& r : fit.rows) {
    std::snprintf(line, sizeof line, "%12s %10s %10s %+6.1f%% %16s %14s\n", format_quantity(r.bytes, Dimension::bytes).c_str(),
                  format_quantity(r.measured_s, Dimension::time).c_str(), format_quantity(r.fitted_s, Dimension::time).c_str(),
                  100 * (r.fitted_s - r.measured_s) / r.measured_s, format_quantity(r.measured_busbw_Bps, Dimension::bandwidth).c_str(),
                  format_quantity(r.fitted_busbw_Bps, Dimension::bandwidth).c_str());
    out << line;
  }
  char scales[160];
  std::snprintf(scales, sizeof scales, ": collective latency x%.3f, bandwidth x%.3f of the model's", fit.latency_scale, fit.bandwidth_scale);
  out << "\nfitted " << fit.link_id << scales << " (exact at the smallest and largest sizes)\n";
}

}  // namespace fleetsim
