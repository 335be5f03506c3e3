#include "fleetsim/profile.hpp"

#include "fleetsim/scenario.hpp"
#include "json_reader.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

constexpr std::string_view kKernels[] = {"gemm",       "gemm-square",    "stream",    "memcpy",     "launch",
                                         "all-reduce", "all-gather",     "reduce-scatter", "broadcast", "reduce",
                                         "all-to-all", "send-recv",      "memcpy-h2d", "memcpy-d2h", "peer-copy",
                                         "peer-copy-no-access", "stream-alone", "stream-beside-gemm", "gemm-alone", "gemm-beside-stream"};

template <typename Entry, typename Read>
std::vector<Entry> read_entries(ObjectReader& top, std::string_view key, Read read) {
  std::vector<Entry> entries;
  const Json* object = top.field(key);
  if (object == nullptr) return entries;
  if (!object->is_object()) {
    top.problem(key, "expected an object of catalog ids, found " + detail::describe(*object));
    return entries;
  }
  for (const auto& [id, value] : object->items()) {
    ObjectReader r(value, top.pointer(key) + "/" + id, top.problems());
    if (!r.ok()) continue;
    entries.push_back(read(r, id));
    r.finish();
  }
  return entries;
}

}  // namespace

Profile parse_profile(std::string_view json_text, const std::string& file_name) {
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  Profile p;
  p.file = file_name;
  if (top.ok()) {
    if (top.integer("fleetsim_profile", Need::required, 1, 1).value_or(0) != 1 && problems.empty()) {
      top.problem("fleetsim_profile", "expected 1");
    }
    if (const Json* prov = top.field("provenance", Need::required)) {
      if (!prov->is_object()) top.problem("provenance", "expected an object of strings, found " + detail::describe(*prov));
      else {
        for (const auto& [key, value] : prov->items()) {
          if (!value.is_string()) {
            problems.add(top.pointer("provenance") + "/" + key, "expected a string, found " + detail::describe(value));
          } else {
            p.provenance.emplace_back(key, value.get<std::string>());
          }
        }
      }
    }
    p.gpus = read_entries<GpuCalibration>(top, "gpus", [](ObjectReader& r, const std::string& id) {
      GpuCalibration g{.id = id, .peak_flop_per_s = {}, .memory_bandwidth_Bps = {}, .launch_overhead_s = {}, .kernel_compute_scale = {}, .kernel_memory_scale = {}, .shared_memory_bandwidth_Bps = {}, .compute_pool_devices = {}};
      if (const Json* flops = r.field("peak_flops")) {
        ObjectReader f(*flops, r.pointer("peak_flops"), r.problems());
        for (std::size_t d = 0; d < kDtypeCount; ++d) {
          g.peak_flop_per_s[d] = f.quantity(dtype_name(static_cast<Dtype>(d)), Dimension::flop_rate, Need::optional);
          if (g.peak_flop_per_s[d] && *g.peak_flop_per_s[d] <= 0) f.problem(dtype_name(static_cast<Dtype>(d)), "expected a positive rate");
        }
        f.finish();
      }
      g.memory_bandwidth_Bps = r.quantity("memory_bandwidth", Dimension::bandwidth, Need::optional);
      if (g.memory_bandwidth_Bps && *g.memory_bandwidth_Bps <= 0) r.problem("memory_bandwidth", "expected a positive bandwidth");
      g.launch_overhead_s = r.quantity("launch_overhead", Dimension::time, Need::optional);
      g.kernel_compute_scale = r.number("kernel_compute_scale", Need::optional, 1e-3, 1e3);
      g.kernel_memory_scale = r.number("kernel_memory_scale", Need::optional, 1e-3, 1e3);
      g.shared_memory_bandwidth_Bps = r.quantity("shared_memory_bandwidth", Dimension::bandwidth, Need::optional);
      if (g.shared_memory_bandwidth_Bps && *g.shared_memory_bandwidth_Bps <= 0) r.problem("shared_memory_bandwidth", "expected a positive bandwidth");
      g.compute_pool_devices = r.number("compute_pool", Need::optional, 1e-3);
      return g;
    });
    p.links = read_entries<LinkCalibration>(top, "links", [](ObjectReader& r, const std::string& id) {
      LinkCalibration l{.id = id, .bandwidth_Bps = r.quantity("bandwidth", Dimension::bandwidth, Need::optional),
                        .latency_s = r.quantity("latency", Dimension::time, Need::optional),
                        .collective_latency_scale = r.number("collective_latency_scale", Need::optional, 0.0, 1e6),
                        .collective_bandwidth_scale = r.number("collective_bandwidth_scale", Need::optional, 1e-6, 1e6)};
      if (l.bandwidth_Bps && *l.bandwidth_Bps <= 0) r.problem("bandwidth", "expected a positive bandwidth");
      return l;
    });
    if (const Json* list = top.field("measurements")) {
      if (!list->is_array()) top.problem("measurements", "expected an array, found " + detail::describe(*list));
      for (std::size_t i = 0; list->is_array() && i < list->size(); ++i) {
        ObjectReader r((*list)[i], detail::child_pointer(top.pointer("measurements"), i), problems);
        if (!r.ok()) continue;
        Measurement m;
        m.kernel = kKernels[r.choice("kernel", kKernels, 0)];
        const std::string dtype = r.string_or("dtype", "fp32");
        if (auto d = parse_dtype(dtype)) m.dtype = *d;
        else r.problem("dtype", "expected a dtype such as fp32, found \"" + dtype + "\"");
        m.size = r.number("size", Need::required).value_or(0);
        m.seconds = r.number("seconds", Need::required).value_or(0);
        m.devices = r.string_or("devices", "");
        m.spread = r.number("spread", Need::optional).value_or(0);
        r.finish();
        p.measurements.push_back(std::move(m));
      }
    }
    top.finish();
  }
  problems.throw_if_any();
  return p;
}

Profile load_profile(const std::string& path) { return parse_profile(read_text_file(path), path); }

std::size_t apply_profile(ClusterSpec& cluster, const Profile& profile) {
  std::size_t changed = 0;
  auto calibrate_link = [&](LinkType& link) {
    for (const LinkCalibration& c : profile.links) {
      if (c.id != link.id) continue;
      if (c.bandwidth_Bps) {
        link.nccl_bandwidth_Bps *= *c.bandwidth_Bps / link.bandwidth_Bps;  // NCCL's view moves with the link
        link.bandwidth_Bps = *c.bandwidth_Bps;
      }
      if (c.latency_s) link.latency_s = *c.latency_s;
      if (c.collective_latency_scale) link.collective_latency_scale = *c.collective_latency_scale;
      if (c.collective_bandwidth_scale) link.collective_bandwidth_scale = *c.collective_bandwidth_scale;
      link.source = "calibrated: " + profile.file;
      ++changed;
    }
  };
  for (NodeGroup& group : cluster.groups) {
    for (const GpuCalibration& c : profile.gpus) {
      if (c.id != group.gpu.id) continue;
      // The roofline takes the measured rates; the kernel model keeps the figures its constants were
      // fitted against, times the profile's refinement of it.
      GpuType& gpu = group.gpu;
      const GpuType before = gpu;
      for (std::size_t d = 0; d < kDtypeCount; ++d) {
        if (c.peak_flop_per_s[d]) gpu.peak_flop_per_s[d] = *c.peak_flop_per_s[d];
      }
      if (c.memory_bandwidth_Bps) gpu.memory_bandwidth_Bps = *c.memory_bandwidth_Bps;
      for (std::size_t d = 0; d < kDtypeCount; ++d) {
        const Dtype dtype = static_cast<Dtype>(d);
        if (gpu.peak_for(dtype) > 0) gpu.kernel_compute_scale[d] *= before.peak_for(dtype) / gpu.peak_for(dtype) * c.kernel_compute_scale.value_or(1);
      }
      if (c.memory_bandwidth_Bps) gpu.kernel_memory_scale *= before.memory_bandwidth_Bps / gpu.memory_bandwidth_Bps;
      gpu.kernel_memory_scale *= c.kernel_memory_scale.value_or(1);
      if (c.launch_overhead_s) gpu.launch_overhead_s = *c.launch_overhead_s;
      // Time-sliced devices take turns at the memory and compute rather than share them (the two do not combine).
      if (c.shared_memory_bandwidth_Bps && group.time_sliced_tasks == 1) group.node.memory_bus_Bps = *c.shared_memory_bandwidth_Bps;
      if (c.compute_pool_devices && group.time_sliced_tasks == 1) {
        group.node.compute_pool_devices = std::min(*c.compute_pool_devices, static_cast<double>(group.node.gpus));
      }
      gpu.source = "calibrated: " + profile.file;
      ++changed;
    }
    calibrate_link(group.gpu_link);
    calibrate_link(group.host_link);
    calibrate_link(group.nic);
  }
  if (cluster.fabric.link) calibrate_link(*cluster.fabric.link);
  return changed;
}

}  // namespace fleetsim
