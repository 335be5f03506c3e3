#include "serving.hpp"

#include <algorithm>

namespace fleetsim::run {

Serving::Serving(const Scenario& scenario, const Cluster& cluster, EventQueue& queue, std::uint64_t seed, std::uint32_t arrival_kind,
                 std::uint32_t iteration_kind)
    : sc_(scenario), cluster_(cluster) {
  sets_.reserve(sc_.serving.size());
  for (std::uint32_t k = 0; k < sc_.serving.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    const serving::EventNames names{.arrival_kind = arrival_kind, .iteration_kind = iteration_kind, .arrival_subject = k,
                                    .first_replica_subject = static_cast<std::uint32_t>(replica_owner_.size())};
    // Each deployment draws its requests from streams of its own: the run's seed, the deployment's place.
    sets_.emplace_back(d, serving::make_requests(d, seed, k), queue, names);
    for (std::uint32_t r = 0; r < static_cast<std::uint32_t>(d.replicas); ++r) replica_owner_.emplace_back(k, r);
  }
}

void Serving::start(Occupancy& occupancy, GpuMemory& memory) {
  for (std::size_t k = 0; k < sets_.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    const KvCapacity c = kv_capacity(d);
    const double engine_bytes = c.weights_per_gpu_bytes + c.activation_bytes + c.reserved_bytes + c.usable_bytes;
    for (const ServingDeployment::Placement& p : d.placement) {
      const std::uint32_t first = index(cluster_.first_gpu(make_id<NodeId>(p.node))) + static_cast<std::uint32_t>(p.first_gpu);
      for (std::uint32_t g = first; g < first + static_cast<std::uint32_t>(d.tp); ++g) {
        occupancy.set_held(g, true);
        memory.hold(make_id<GpuId>(g), engine_bytes, 0);
      }
    }
    sets_[k].start();
  }
}

std::uint64_t Serving::unfinished() const {
  std::uint64_t n = 0;
  for (const serving::ReplicaSet& s : sets_) n += s.unfinished();
  return n;
}

void Serving::summarize(double end_s, Summary& summary) const {
  for (std::size_t k = 0; k < sets_.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    ServingResult r = sets_[k].summarize(end_s);
    r.deployment = sc_.serving[k];
    // The replicas' GPUs computed while their iterations ran: busy at TDP, idle power otherwise (the
    // run's summary counted them idle throughout).
    const GpuType& gpu = d.cluster.groups.front().gpu;
    summary.gpu_busy_s += r.gpu_busy_s;
    summary.energy_j += r.gpu_busy_s * (gpu.tdp_w - gpu.idle_power_w);
    if (r.completed > 0) summary.makespan_s = std::max(summary.makespan_s, r.last_finish_s);
    // Beside the workflows' SLOs, so that compare and plan weigh them as they weigh those.
    for (const ServingResult::Verdict& v : r.verdicts) {
      summary.slos.push_back({.deployment = d.name, .metric = v.slo.metric + "_p" + std::to_string(static_cast<int>(v.slo.percentile)),
                              .target = v.slo.target_s, .actual = v.achieved_s, .met = v.met});
    }
    summary.serving.push_back(std::move(r));
  }
  if (summary.gpus > 0 && end_s > 0) summary.gpu_utilization = summary.gpu_busy_s / (summary.gpus * end_s);
}

}  // namespace fleetsim::run
