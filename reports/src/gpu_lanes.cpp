#include "gpu_lanes.hpp"

#include <algorithm>

namespace fleetsim {

GpuLanes gpu_lanes(const Trace& trace, std::uint32_t gpus, double end_s) {
  GpuLanes out{std::vector<std::uint32_t>(trace.gpus.size(), 0), std::vector<std::uint32_t>(gpus, 1)};
  struct Hold {
    double from, to;
    std::uint32_t entry;
  };
  std::vector<std::vector<Hold>> holds(gpus);
  for (const TaskRecord& t : trace.tasks) {
    if (t.start_s == kNever) continue;
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      holds[index(trace.gpus[t.gpu_begin + i])].push_back({gang_start_s(t), t.end_s == kNever ? end_s : t.end_s, t.gpu_begin + i});
    }
  }
  for (const LeftGang& left : trace.left_gangs) {  // gangs before a resize or a stop
    for (std::uint32_t i = 0; i < left.gpu_count; ++i) {
      holds[index(trace.gpus[left.gpu_begin + i])].push_back({left.start_s, left.end_s, left.gpu_begin + i});
    }
  }
  std::vector<double> busy_until;  // per lane of one GPU
  for (std::uint32_t g = 0; g < gpus; ++g) {
    auto& h = holds[g];
    std::sort(h.begin(), h.end(), [](const Hold& a, const Hold& b) { return a.from < b.from || (a.from == b.from && a.entry < b.entry); });
    busy_until.clear();
    for (const Hold& x : h) {
      std::uint32_t l = 0;
      while (l < busy_until.size() && busy_until[l] > x.from) ++l;
      if (l == busy_until.size()) busy_until.push_back(0);
      busy_until[l] = x.to;
      out.lane[x.entry] = l;
    }
    out.per_gpu[g] = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(busy_until.size()));
  }
  return out;
}

std::optional<std::uint32_t> load_entry(const Trace& trace, const WeightLoad& load) {
  const TaskRecord& t = trace.tasks[index(load.task)];
  if (t.start_s == kNever) return std::nullopt;
  for (std::uint32_t entry = t.gpu_begin; entry < t.gpu_begin + t.gpu_count; ++entry) {
    if (trace.gpus[entry] == load.gpu) return entry;
  }
  return std::nullopt;
}

}  // namespace fleetsim
