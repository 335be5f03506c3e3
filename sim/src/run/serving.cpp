#include "serving.hpp"

#include <algorithm>

#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim::run {

Serving::Serving(const Scenario& scenario, const Cluster& cluster, EventQueue& queue, Flows& flows, const Topology& topology, std::uint64_t seed,
                 std::uint32_t arrival_kind, std::uint32_t iteration_kind, std::uint32_t scale_kind)
    : sc_(scenario), cluster_(cluster), queue_(queue), flows_(flows), topology_(topology), scale_kind_(scale_kind) {
  sets_.reserve(sc_.serving.size());
  for (std::uint32_t k = 0; k < sc_.serving.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    first_replica_.push_back(static_cast<std::uint32_t>(replica_owner_.size()));
    const serving::EventNames names{.arrival_kind = arrival_kind, .iteration_kind = iteration_kind, .arrival_subject = k, .first_replica_subject = first_replica_.back()};
    // Each deployment draws its requests from streams of its own: the run's seed, the deployment's place.
    sets_.emplace_back(d, serving::make_requests(d, seed, k), queue, names);
    sets_.back().send_kv_with([this, k](const serving::KvTransfer& t) { send_kv(k, t); },
                              [this, k](std::uint32_t from, std::uint32_t to) { return reaches(k, from, to); });
    // The engine's start-up, and its weights read from the node's memory over the GPU's host link.
    const NodeGroup& g = d.cluster.groups.front();
    const auto engine = [&](const ServingDeployment& shape) {
      const KvCapacity c = kv_capacity(shape);
      return std::pair{d.engine.startup_s + (g.host_link.bandwidth_Bps > 0 ? c.weights_per_gpu_bytes / g.host_link.bandwidth_Bps : 0),
                       c.weights_per_gpu_bytes + c.activation_bytes + c.reserved_bytes + c.usable_bytes};
    };
    const auto same = engine(d), decode = d.decode_tp > 0 ? engine(d.decode_shape()) : same;
    for (std::uint32_t lane = 0; lane < static_cast<std::uint32_t>(d.replicas * d.lanes_a_replica()); ++lane) {
      replica_owner_.emplace_back(k, lane);
      const auto [startup_s, bytes] = d.decodes_only(lane / static_cast<std::uint32_t>(d.lanes_a_replica())) ? decode : same;
      startup_s_.push_back(startup_s);
      engine_bytes_.push_back(bytes);
    }
  }
  gpu_replica_.assign(cluster_.gpu_count(), -1);
  replica_gpus_down_.assign(replica_owner_.size(), 0);
  replica_gpus_.resize(replica_owner_.size());
  last_busy_s_.assign(sets_.size(), {0, 0});
  scaled_.resize(sets_.size());
  for (std::uint32_t k = 0; k < sets_.size(); ++k) {
    if (sc_.serving[k]->autoscale.on()) sets_[k].on_drained([this, k](std::uint32_t local) { give_back_gpus(first_replica_[k] + local); });
  }
}

// The subject a lane's replica holds its GPUs under (its first lane's), and the GPUs that hold the lane's KV:
// the replica's, or with data-parallel attention its rank's one.
std::uint32_t Serving::replica_subject(std::uint32_t deployment, std::uint32_t lane) const {
  const auto lanes = static_cast<std::uint32_t>(sc_.serving[deployment]->lanes_a_replica());
  return first_replica_[deployment] + lane / lanes * lanes;
}
std::span<const std::uint32_t> Serving::kv_gpus(std::uint32_t deployment, std::uint32_t lane) const {
  const std::span<const std::uint32_t> gpus = replica_gpus_[replica_subject(deployment, lane)];
  if (!sc_.serving[deployment]->dp_attention || gpus.empty()) return gpus;  // empty: not placed (never sent to)
  const std::size_t rank = lane % static_cast<std::uint32_t>(sc_.serving[deployment]->lanes_a_replica());
  FLEETSIM_CHECK(rank < gpus.size(), "a data-parallel rank beyond its replica's GPUs");
  return gpus.subspan(rank, 1);
}

// Each share of the KV (a stage's layers', a decode GPU's heads: the engine's) goes from its GPU of the
// prefill replica to its GPU of the decode replica (with data-parallel attention, the prefill rank's to the
// decode rank's), all at once, over the routes the topology picks (NVLink within a node; the NICs and the
// fabric between nodes), sharing every link with whatever else is in flight.
void Serving::send_kv(std::uint32_t deployment, const serving::KvTransfer& t) {
  const std::uint32_t number = next_kv_++;
  const std::span<const std::uint32_t> from = kv_gpus(deployment, t.from), to = kv_gpus(deployment, t.to);
  kv_in_flight_.emplace(number, KvInFlight{deployment, t.request, replica_subject(deployment, t.from), replica_subject(deployment, t.to), t.shares.size()});
  const auto ends = [&](std::size_t i) {
    return std::pair{topology_.gpu_vertex(make_id<GpuId>(from[t.shares[i].from])), topology_.gpu_vertex(make_id<GpuId>(to[t.shares[i].to]))};
  };
  // Layer by layer: what the links could carry while the pass ran has gone, each link's capacity shared by the
  // transfer's shares over it in proportion to their bytes, a share as far as its slowest link let it (what
  // else the links carried meanwhile is not counted, nor are those bytes on the links' counts).
  std::vector<double>& sendable = kv_sendable_;
  sendable.assign(t.shares.size(), 0.0);
  if (t.early_s > 0) {
    std::vector<std::vector<std::uint32_t>>& routes = kv_routes_;
    if (routes.size() < t.shares.size()) routes.resize(t.shares.size());
    kv_link_bytes_.resize(topology_.links().size(), 0.0);
    for (std::size_t i = 0; i < t.shares.size(); ++i) {
      const auto [src, dst] = ends(i);
      routes[i].clear();
      if (!topology_.try_route(src, dst, route_key(number, i), routes[i])) continue;
      for (std::uint32_t l : routes[i]) {
        if (kv_link_bytes_[l] == 0) kv_loaded_.push_back(l);
        kv_link_bytes_[l] += t.shares[i].bytes;
      }
    }
    for (std::size_t i = 0; i < t.shares.size(); ++i) {
      double share = routes[i].empty() ? 0.0 : 1.0;  // of its bytes
      for (std::uint32_t l : routes[i]) share = std::min(share, topology_.links()[l].capacity_Bps * t.early_s / kv_link_bytes_[l]);
      sendable[i] = share * t.shares[i].bytes;
    }
    for (std::uint32_t l : kv_loaded_) kv_link_bytes_[l] = 0;
    kv_loaded_.clear();
  }
  for (std::size_t i = 0; i < t.shares.size(); ++i) {
    const serving::KvShare& share = t.shares[i];
    FLEETSIM_CHECK(share.from < from.size() && share.to < to.size(), "a KV share from or to a GPU its replica does not hold");
    const FlowTag tag{FlowKind::kv, deployment, make_id<TaskId>(number)};
    const auto [src, dst] = ends(i);
    if (!flows_.start(tag, src, dst, serving::kv_bytes_left(share.bytes, sendable[i], t), route_key(number, i))) kv_stranded(number);
  }
}

// Every GPU of one lane's replica that would send a share of a KV cache has a route to the GPU of the
// other's that would receive it (equal TP: each rank to the same rank; with data-parallel attention, the
// one rank to the other). While no link is down, all do.
bool Serving::reaches(std::uint32_t deployment, std::uint32_t from, std::uint32_t to) const {
  if (!topology_.any_link_down()) return true;
  const ServingDeployment& d = *sc_.serving[deployment];
  const std::span<const std::uint32_t> a = kv_gpus(deployment, from), b = kv_gpus(deployment, to);
  if (a.empty() || b.empty()) return true;  // not placed (never sent to)
  const auto lanes = static_cast<std::uint32_t>(d.lanes_a_replica());
  const int p = d.dp_attention ? 1 : d.tp_of(from / lanes), q = d.dp_attention ? 1 : d.tp_of(to / lanes);
  const double kv_heads = serving::kv_heads_shared(d);
  std::vector<serving::KvShare> shares;
  for (std::uint32_t stage = 0; stage < static_cast<std::uint32_t>(d.dp_attention ? 1 : d.pp); ++stage) serving::add_kv_shares(p, q, kv_heads, 0, stage, shares);
  for (const serving::KvShare& share : shares) {
    FLEETSIM_CHECK(share.from < a.size() && share.to < b.size(), "a KV share from or to a GPU its replica does not hold");
    if (!topology_.reachable(topology_.gpu_vertex(make_id<GpuId>(a[share.from])), topology_.gpu_vertex(make_id<GpuId>(b[share.to])))) return false;
  }
  return true;
}

void Serving::routes_changed() {
  for (serving::ReplicaSet& set : sets_) set.routes_changed();
}

void Serving::on_network(const std::vector<FlowDelivery>& delivered) {
  for (const FlowDelivery& d : delivered) {
    const FlowTag tag = FlowTag::of(d.tag);
    if (tag.kind != FlowKind::kv) continue;
    const auto it = kv_in_flight_.find(index(tag.task));
    if (it == kv_in_flight_.end() || --it->second.flows_left > 0) continue;  // given up, or shares still on the way
    const KvInFlight done = it->second;
    kv_in_flight_.erase(it);
    sets_[done.deployment].kv_arrived(done.request);
  }
}

void Serving::lose_stranded_kv() {
  if (stranded_kv_.empty()) return;  // after every event: mostly none
  std::vector<std::uint32_t> stranded;
  stranded.swap(stranded_kv_);
  for (std::uint32_t number : stranded) give_up_kv(number);
}

// The transfer's flows still in flight are cancelled, and its request prefilled again.
void Serving::give_up_kv(std::uint32_t number) {
  const auto it = kv_in_flight_.find(number);
  if (it == kv_in_flight_.end()) return;  // given up already (another share of it was stranded too)
  const KvInFlight lost = it->second;
  kv_in_flight_.erase(it);
  flows_.cancel_kv(number, queue_.now());
  sets_[lost.deployment].kv_lost(lost.request);
}

void Serving::take_gpus(std::uint32_t replica, std::vector<std::uint32_t> gpus) {
  for (std::uint32_t g : gpus) {
    gpu_replica_[g] = replica;
    occupancy_->set_held(g, true);
    memory_->hold(make_id<GpuId>(g), engine_bytes_[replica], queue_.now());
  }
  replica_gpus_[replica] = std::move(gpus);
}

// A drained replica's GPUs go back to the tasks, their VRAM too (a GPU down was wiped already; one failing
// now, which ended the drain, is released here and wiped by the fault just after). A GPU down goes to the
// tasks once repaired: the replica no longer counts it.
void Serving::give_back_gpus(std::uint32_t replica) {
  for (std::uint32_t g : replica_gpus_[replica]) {
    gpu_replica_[g] = -1;
    occupancy_->set_held(g, false);
    if (!occupancy_->down(g)) memory_->unhold(make_id<GpuId>(g), engine_bytes_[replica], queue_.now());
  }
  replica_gpus_[replica].clear();
  replica_gpus_down_[replica] = 0;
}

// Each pool of the deployment decides apart (disaggregated: its prefill replicas, then its decode replicas;
// otherwise every replica), the prefill pool's addition taking its GPUs before the decode pool looks.
void Serving::scale(std::uint32_t k) {
  const ServingDeployment& d = *sc_.serving[k];
  const ServingDeployment::Autoscale& as = d.autoscale;
  serving::ReplicaSet& set = sets_[k];
  bool above_min = false;
  for (const bool decode : {false, true}) {
    if (decode && d.prefill_replicas == 0) break;
    const int min = decode ? as.decode_min : as.min, max = decode ? as.decode_max : as.max;
    const serving::ReplicaSet::Load load = set.load(decode);
    ScaleCounts& counts = scaled_[k][decode ? 1 : 0];
    double& last_busy_s = last_busy_s_[k][decode ? 1 : 0];
    const int lanes = d.lanes_a_replica();  // a pipeline's lanes run side by side, each busy as its replica
    const double busy = (load.busy_s - last_busy_s) / (as.interval_s * std::max(1, load.serving) * lanes);
    last_busy_s = load.busy_s;
    const int replicas = load.serving + load.starting;
    above_min |= replicas > min;
    counts.waiting_for_gpus = false;  // until this decision says otherwise
    if (load.waiting >= static_cast<std::uint64_t>(as.queue) * static_cast<std::uint64_t>(std::max(1, load.serving)) && replicas < max && load.parked) {
      std::vector<std::uint32_t> gpus;
      if (free_gpus_for(d, *load.parked, gpus) == 0) {
        const std::uint32_t subject = first_replica_[k] + *load.parked * static_cast<std::uint32_t>(lanes);
        take_gpus(subject, std::move(gpus));
        set.replica_up(*load.parked, startup_s_[subject]);
        ++counts.ups;
      } else {
        ++counts.ups_without_gpus;
        counts.waiting_for_gpus = true;
        counts.wanted = *load.parked;
      }
    } else if (load.waiting == 0 && load.serving > min && load.starting == 0 && load.last_serving &&
               busy * load.serving / (load.serving - 1) < as.target_busy) {
      set.drain(*load.last_serving);
      ++counts.downs;
    }
  }
  // Decisions go on while requests remain, and after them until the replicas are back to min.
  if (set.unfinished() > 0 || above_min) queue_.push(queue_.now() + as.interval_s, scale_kind_, k);
}

// Replica slot `replica`'s GPUs as a scenario places it, stage after stage: each piece (a node's worth of them,
// or what is left) on the first node of its group with that many GPUs no task, replica or failure holds, and
// none of this replica's other pieces took (nor `taken`). The GPUs of the pieces that find none (0: the replica is
// placed).
int Serving::free_gpus_for(const ServingDeployment& d, std::uint32_t replica, std::vector<std::uint32_t>& gpus, std::span<const std::uint32_t> taken) const {
  gpus.clear();
  int unplaced = 0;
  for (const int need : d.piece_gpus(replica)) {
    std::vector<std::uint32_t> piece;
    for (std::uint32_t n = d.first_node; n < d.first_node + d.nodes && piece.size() < static_cast<std::size_t>(need); ++n) {
      piece.clear();
      const std::uint32_t first = index(cluster_.first_gpu(make_id<NodeId>(n)));
      for (std::uint32_t g = first; g < first + cluster_.gpus_in(make_id<NodeId>(n)) && piece.size() < static_cast<std::size_t>(need); ++g) {
        if (!occupancy_->busy(g) && occupancy_->tasks_on(g).empty() && std::find(gpus.begin(), gpus.end(), g) == gpus.end() &&
            std::find(taken.begin(), taken.end(), g) == taken.end()) {
          piece.push_back(g);
        }
      }
    }
    if (piece.size() < static_cast<std::size_t>(need)) {
      unplaced += need;
    } else {
      gpus.insert(gpus.end(), piece.begin(), piece.end());
    }
  }
  return unplaced;
}

void Serving::start(Occupancy& occupancy, GpuMemory& memory) {
  memory_ = &memory;
  occupancy_ = &occupancy;
  for (std::size_t k = 0; k < sets_.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    // A replica's GPUs, stage after stage (its pieces in order), are held under its first lane's subject.
    for (std::size_t r = 0; r < static_cast<std::size_t>(d.replicas); ++r) {
      if (!d.starts_placed(r)) continue;
      std::vector<std::uint32_t> gpus;
      for (std::size_t piece = d.first_piece(r); piece < d.first_piece(r) + d.pieces_a_replica(r); ++piece) {
        const ServingDeployment::Placement& p = d.placement[piece];
        const std::uint32_t first = index(cluster_.first_gpu(make_id<NodeId>(p.node))) + static_cast<std::uint32_t>(p.first_gpu);
        for (std::uint32_t g = first; g < first + static_cast<std::uint32_t>(p.gpus); ++g) gpus.push_back(g);
      }
      take_gpus(first_replica_[k] + static_cast<std::uint32_t>(r * static_cast<std::size_t>(d.lanes_a_replica())), std::move(gpus));
    }
    sets_[k].start();
    if (d.autoscale.on()) queue_.push(d.autoscale.interval_s, scale_kind_, static_cast<std::uint32_t>(k));
  }
}

void Serving::gpu_down(std::uint32_t gpu) {
  const std::int64_t replica = gpu_replica_[gpu];
  if (replica < 0) return;
  const auto [k, lane] = replica_owner_[static_cast<std::size_t>(replica)];
  if (replica_gpus_down_[static_cast<std::size_t>(replica)]++ != 0) return;
  sets_[k].replica_down(lane / static_cast<std::uint32_t>(sc_.serving[k]->lanes_a_replica()));
  // Its KV transfers, to or from it, stop with it (in the order they began, for the same run every time).
  std::vector<std::uint32_t> cut;
  for (const auto& [number, t] : kv_in_flight_) {
    if (t.from == static_cast<std::uint32_t>(replica) || t.to == static_cast<std::uint32_t>(replica)) cut.push_back(number);
  }
  std::sort(cut.begin(), cut.end());
  for (std::uint32_t number : cut) give_up_kv(number);
}

void Serving::gpu_up(std::uint32_t gpu) {
  const std::int64_t replica = gpu_replica_[gpu];
  if (replica < 0) return;
  const auto [k, lane] = replica_owner_[static_cast<std::size_t>(replica)];
  // The failure wiped the GPU's memory: the engine takes its share again as it starts.
  memory_->hold(make_id<GpuId>(gpu), engine_bytes_[static_cast<std::size_t>(replica)], queue_.now());
  if (--replica_gpus_down_[static_cast<std::size_t>(replica)] == 0) {
    sets_[k].replica_up(lane / static_cast<std::uint32_t>(sc_.serving[k]->lanes_a_replica()), startup_s_[static_cast<std::size_t>(replica)]);
  }
}

// The pieces of the replicas the deployments' last decisions wanted that find no room now (GPUs may have
// come free since), in whole nodes of each deployment's group.
std::vector<Serving::NodesWanted> Serving::nodes_wanted() const {
  std::vector<NodesWanted> out;
  std::vector<std::uint32_t> scratch, taken;
  for (std::size_t k = 0; k < sets_.size(); ++k) {
    const ServingDeployment& d = *sc_.serving[k];
    taken.clear();
    // Disaggregated, each pool's want apart, the decode replica's pieces beside those the prefill replica's took.
    for (const ScaleCounts& pool : scaled_[k]) {
      if (!pool.waiting_for_gpus) continue;
      const int unplaced = free_gpus_for(d, pool.wanted, scratch, taken), per_node = d.cluster.groups.front().node.gpus;
      taken.insert(taken.end(), scratch.begin(), scratch.end());
      if (unplaced <= 0) continue;
      NodesWanted& w = out.emplace_back(NodesWanted{d.first_node, d.first_node + d.nodes, (unplaced + per_node - 1) / per_node, {}});
      for (const std::uint32_t g : scratch) {
        const std::uint32_t node = index(cluster_.node_of(make_id<GpuId>(g)));
        if (std::find(w.holding.begin(), w.holding.end(), node) == w.holding.end()) w.holding.push_back(node);
      }
    }
  }
  return out;
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
    const auto scaling = [](const ScaleCounts& c) { return ServingResult::Scaling{c.ups, c.downs, c.ups_without_gpus}; };
    r.scaled = scaling(scaled_[k][0]);
    r.decode_scaled = scaling(scaled_[k][1]);
    r.kv_on_shared_network = d.prefill_replicas > 0;
    if (r.replica_failures > 0 || r.scaled.ups > 0 || r.decode_scaled.ups > 0) {
      const bool guessed = std::find(d.engine.assumed.begin(), d.engine.assumed.end(), "startup") != d.engine.assumed.end();
      const std::string decode = d.decode_tp > 0 ? " (a prefill replica; a decode replica " +
                                 format_quantity(startup_s_[first_replica_[k] + static_cast<std::uint32_t>(d.prefill_replicas * d.lanes_a_replica())], Dimension::time) + ")"
                                                 : "";
      r.notes.push_back("a replica serves " + format_quantity(startup_s_[first_replica_[k]], Dimension::time) + decode + " after it is given GPUs, or they are back: " + d.engine.name + "'s start-up of " +
                        format_quantity(d.engine.startup_s, Dimension::time) + (guessed ? " (a guess, models/engines.json)" : "") + " and its weights over the host link");
    }
    // The replicas' GPUs computed while their iterations ran: busy at TDP, idle power otherwise (the
    // run's summary counted them idle throughout).
    const GpuType& gpu = d.cluster.groups.front().gpu;
    summary.gpu_busy_s += r.gpu_busy_s;
    summary.energy_j += r.gpu_busy_s * (gpu.tdp_w - gpu.idle_power_w);
    if (r.completed > 0) summary.makespan_s = std::max(summary.makespan_s, r.last_finish_s);
    // Beside the workflows' SLOs, so that compare and plan weigh them as they weigh those.
    for (const ServingResult::Verdict& v : r.verdicts) {
      summary.slos.push_back({.tenant = v.slo.tenant, .deployment = d.name, .work_class = {}, .metric = v.slo.metric + "_p" + std::to_string(static_cast<int>(v.slo.percentile)),
                              .target = v.slo.target_s, .actual = v.achieved_s, .met = v.met});
    }
    summary.serving.push_back(std::move(r));
  }
  if (summary.gpus > 0 && end_s > 0) summary.gpu_utilization = summary.gpu_busy_s / (summary.gpus * end_s);
}

}  // namespace fleetsim::run
