#include "faults.hpp"

#include <cmath>

#include "events.hpp"

namespace fleetsim::run {

Faults::Faults(const Scenario& sc, const Cluster& cluster, const Topology& topology, const Occupancy& occupancy,
               std::uint64_t seed, EventQueue& queue)
    : sc_(sc), cluster_(cluster), topology_(topology), occupancy_(occupancy), seed_(seed), queue_(queue) {
  const FaultSpec& f = sc_.faults;
  for (std::uint32_t i = 0; i < f.events.size(); ++i) sources_.push_back({FaultSource::Kind::scripted, i, std::nullopt});
  if (f.link_mtbf_s > 0) {
    // Every cable once (the direction created first).
    for (std::uint32_t l = 0; l < topology_.links().size(); ++l) {
      const auto back = topology_.reverse_link(l);
      if (topology_.is_cable(l) && back && *back > l) {
        sources_.push_back({FaultSource::Kind::cable, l, Rng(seed_, 0, "faults/link/" + topology_.link_name(l))});
      }
    }
  }
  const std::uint32_t gpus = cluster_.gpu_count(), nodes = cluster_.node_count();
  for (std::uint32_t g = 0; f.gpu_mtbf_s > 0 && g < gpus; ++g) {
    sources_.push_back({FaultSource::Kind::gpu, g, Rng(seed_, 0, "faults/gpu/" + std::to_string(g))});
  }
  for (std::uint32_t n = 0; f.node_mtbf_s > 0 && n < nodes; ++n) {
    sources_.push_back({FaultSource::Kind::node, n, Rng(seed_, 0, "faults/node/" + std::to_string(n))});
  }
  // Spot nodes are the last ones of the cluster.
  for (std::uint32_t n = nodes - static_cast<std::uint32_t>(sc_.spot.nodes); n < nodes; ++n) {
    sources_.push_back({FaultSource::Kind::spot, n, Rng(seed_, 0, "spot/node/" + std::to_string(n))});
  }
  down_since_.assign(gpus, 0.0);
}

void Faults::start() {
  for (std::uint32_t s = 0; s < sources_.size(); ++s) {
    if (sources_[s].kind != FaultSource::Kind::scripted) {
      schedule_next(s);
    } else if (const double at = sc_.faults.events[sources_[s].target].at_s; at <= sc_.horizon_s) {
      queue_.push(at, kFault, s);
    }
  }
}

Fault Faults::describe(std::uint32_t subject) const {
  const FaultSource& src = sources_[subject];
  switch (src.kind) {
    case FaultSource::Kind::scripted: {
      const FaultEvent& e = sc_.faults.events[src.target];
      if (e.link) return {.link = e.link, .down_s = e.down_s};
      return {.first_gpu = e.gpu_first, .gpus = e.gpu_count, .event = e.what + " failed", .down_s = e.down_s,
              .node = e.what.starts_with("node")};
    }
    case FaultSource::Kind::cable: return {.link = src.target};
    case FaultSource::Kind::gpu:
      return {.first_gpu = src.target, .gpus = 1, .event = "GPU " + cluster_.gpu_name(make_id<GpuId>(src.target)) + " failed"};
    case FaultSource::Kind::node:
    case FaultSource::Kind::spot: {
      const NodeId n = make_id<NodeId>(src.target);
      const std::string name = "node n" + std::to_string(src.target);
      const bool spot = src.kind == FaultSource::Kind::spot;
      return {.first_gpu = index(cluster_.first_gpu(n)), .gpus = cluster_.gpus_in(n),
              .event = spot ? "spot " + name + " was preempted" : name + " failed", .preemption = spot, .node = true};
    }
  }
  return {};
}

Fault Faults::fail(std::uint32_t subject) {
  Fault f = describe(subject);
  FaultSource& src = sources_[subject];
  const FaultSpec& spec = sc_.faults;
  const double mttr = src.kind == FaultSource::Kind::cable ? spec.link_mttr_s
                      : src.kind == FaultSource::Kind::gpu  ? spec.gpu_mttr_s
                      : src.kind == FaultSource::Kind::node ? spec.node_mttr_s
                                                            : sc_.spot.restock_s;
  if (src.rng) f.down_s = mttr > 0 ? src.rng->exponential(1 / mttr) : 0.0;
  if (f.preemption) ++preemptions_;
  return f;
}

Fault Faults::repair(std::uint32_t subject) const { return describe(subject); }

// A repair due after the horizon is queued too: the run then reaches its horizon with the work that waited
// for those GPUs left, rather than running out of events and calling that work stalled.
void Faults::schedule_repair(std::uint32_t subject, double down_s) {
  if (std::isfinite(down_s)) queue_.push(queue_.now() + down_s, kRepair, subject);
}

void Faults::schedule_next(std::uint32_t subject) {
  FaultSource& src = sources_[subject];
  if (!src.rng) return;
  const double mtbf = src.kind == FaultSource::Kind::cable ? sc_.faults.link_mtbf_s
                      : src.kind == FaultSource::Kind::spot ? sc_.spot.mtbp_s
                      : src.kind == FaultSource::Kind::node ? sc_.faults.node_mtbf_s
                                                            : sc_.faults.gpu_mtbf_s;
  const double at = queue_.now() + src.rng->exponential(1 / mtbf);
  if (at <= sc_.horizon_s) queue_.push(at, kFault, subject);
}

void Faults::gpu_down(std::uint32_t gpu, bool preemption) {
  if (!preemption) ++gpu_failures_;
  down_since_[gpu] = queue_.now();
}

void Faults::gpu_up(std::uint32_t gpu) { down_gpu_s_ += queue_.now() - down_since_[gpu]; }

void Faults::summarize(double end_s, Summary& summary) {
  for (std::uint32_t g = 0; g < cluster_.gpu_count(); ++g) {
    if (occupancy_.down(g)) down_gpu_s_ += end_s - down_since_[g];
  }
  summary.gpu_failures = gpu_failures_;
  summary.link_failures = link_failures_;
  summary.spot_preemptions = preemptions_;
  summary.availability = end_s > 0 ? 1 - down_gpu_s_ / (cluster_.gpu_count() * end_s) : 1;
}

}  // namespace fleetsim::run
