// LLM serving deployments inside a run: their replicas hold GPUs from the start (weights loaded, KV
// cache allocated, as an engine is before it takes traffic) and run iteration by iteration on the run's
// event queue (fleetsim/serving.hpp), beside the tasks the policy places on the GPUs left. A
// disaggregated deployment's KV caches move over the run's shared network, beside the tasks' flows.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "../serving/replica_set.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "fleetsim/topology.hpp"
#include "flows.hpp"
#include "occupancy.hpp"

namespace fleetsim::run {

class Serving {
 public:
  // Its events are the run's `arrival_kind`, `iteration_kind` and `scale_kind` (run/events.hpp).
  Serving(const Scenario& scenario, const Cluster& cluster, EventQueue& queue, Flows& flows, const Topology& topology, std::uint64_t seed,
          std::uint32_t arrival_kind, std::uint32_t iteration_kind, std::uint32_t scale_kind);
  // Takes the replicas' GPUs and VRAM and schedules the first requests.
  void start(Occupancy& occupancy, GpuMemory& memory);
  void arrive(std::uint32_t deployment) { sets_[deployment].arrive(); }
  // The flows delivered now: a KV transfer whose last share arrived is handed to its decode replica.
  void on_network(const std::vector<FlowDelivery>& delivered);
  // A KV flow found no route (a link failure): its transfer is given up once the event is through
  // (lose_stranded_kv), and the request prefilled again.
  void kv_stranded(std::uint32_t transfer) { stranded_kv_.push_back(transfer); }
  void lose_stranded_kv();
  // A link was repaired: requests no replica could take for want of a route are routed again.
  void routes_changed();
  // An autoscaled deployment's decision: a replica more on free GPUs, or one fewer (drained first).
  void scale(std::uint32_t deployment);
  // A lane's iteration ended (its subject: one a lane, lanes_a_replica() a replica); false for one a failure cut short.
  bool iteration_done(std::uint32_t lane, std::uint32_t stamp) {
    return sets_[replica_owner_[lane].first].iteration_done(replica_owner_[lane].second, stamp);
  }
  // A GPU failed or was taken back (spot), or is back: the replica holding it goes down, or restarts
  // once all its GPUs are back.
  void gpu_down(std::uint32_t gpu);
  void gpu_up(std::uint32_t gpu);
  std::uint64_t unfinished() const;
  // Nodes a deployment's autoscaling wanted at its last decision for a replica whose pieces find no room
  // now: `nodes` more of its node group's (cluster nodes `first_node` to `end_node`), demand a node
  // autoscaler beside it counts and starts nodes of that group for.
  struct NodesWanted {
    std::uint32_t first_node = 0, end_node = 0;
    int nodes = 0;
    std::vector<std::uint32_t> holding;  // the nodes on where its pieces that fit now lie: kept on for it
  };
  std::vector<NodesWanted> nodes_wanted() const;
  // Each deployment's results up to `end_s`; their GPUs' busy time joins the run's utilization and energy.
  void summarize(double end_s, Summary& summary) const;

 private:
  const Scenario& sc_;
  const Cluster& cluster_;
  EventQueue& queue_;
  Flows& flows_;
  const Topology& topology_;
  std::uint32_t scale_kind_;
  std::vector<serving::ReplicaSet> sets_;
  // A replica is lanes_a_replica() lanes (pipeline stages, or data-parallel ranks), each a subject of its
  // own (its iterations' events); the replica's GPUs are held under its first lane's subject, which
  // stands for the replica below.
  std::vector<std::uint32_t> first_replica_;  // per deployment: its first lane's subject
  std::vector<std::pair<std::uint32_t, std::uint32_t>> replica_owner_;  // per lane subject: (deployment, its lane)
  std::vector<std::int64_t> gpu_replica_;         // per GPU: the replica (first lane) subject holding it, or -1
  std::vector<std::uint32_t> replica_gpus_down_;  // per replica subject: its GPUs down now
  // Per lane subject, its replica's (prefill and decode replicas may differ in TP): a restart, from its GPUs
  // back to serving, and the VRAM the engine takes on each GPU.
  std::vector<double> startup_s_, engine_bytes_;
  GpuMemory* memory_ = nullptr;                   // given at start()
  Occupancy* occupancy_ = nullptr;
  std::vector<std::vector<std::uint32_t>> replica_gpus_;  // per replica subject: the GPUs it holds now
  // Per deployment and pool (every replica, or disaggregated the prefill replicas; the decode replicas): its
  // iteration time at the last decision, and the autoscaler's decisions.
  std::vector<std::array<double, 2>> last_busy_s_;
  struct ScaleCounts {
    std::uint64_t ups = 0, downs = 0, ups_without_gpus = 0;
    bool waiting_for_gpus = false;  // the last decision wanted a replica and found no GPUs for it
    std::uint32_t wanted = 0;       // then: the replica slot it wanted placed
  };
  std::vector<std::array<ScaleCounts, 2>> scaled_;
  // KV transfers on the network, by number (their flows' tag): whose, and how many shares are still to arrive.
  struct KvInFlight {
    std::uint32_t deployment, request;
    std::uint32_t from, to;  // replica subjects
    std::size_t flows_left;
  };
  void give_up_kv(std::uint32_t number);
  bool reaches(std::uint32_t deployment, std::uint32_t from, std::uint32_t to) const;  // the deployment's lanes
  std::uint32_t replica_subject(std::uint32_t deployment, std::uint32_t lane) const;
  std::span<const std::uint32_t> kv_gpus(std::uint32_t deployment, std::uint32_t lane) const;
  std::unordered_map<std::uint32_t, KvInFlight> kv_in_flight_;
  std::uint32_t next_kv_ = 0;
  // A KV transfer's scratch, kept between transfers: what each share could send during the pass, its route, and
  // the transfer's bytes on each link (zero but on the links in kv_loaded_ while one is worked out).
  std::vector<double> kv_sendable_;
  std::vector<std::vector<std::uint32_t>> kv_routes_;
  std::vector<double> kv_link_bytes_;
  std::vector<std::uint32_t> kv_loaded_;
  std::vector<std::uint32_t> stranded_kv_;
  int free_gpus_for(const ServingDeployment& d, std::uint32_t replica, std::vector<std::uint32_t>& gpus, std::span<const std::uint32_t> taken = {}) const;
  void send_kv(std::uint32_t deployment, const serving::KvTransfer& t);
  void take_gpus(std::uint32_t replica, std::vector<std::uint32_t> gpus);
  void give_back_gpus(std::uint32_t replica);
};

}  // namespace fleetsim::run
