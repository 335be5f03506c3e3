// Collectives over a gang of GPUs, expressed as flows on the topology, as NCCL runs them.
//
// On GPUs that NCCL runs (a known architecture), NCCL's own cost model (fleetsim/nccl.hpp) picks the
// algorithm, protocol and channels and gives the time the choice achieves; the plan's flows then
// take the shape of that algorithm, each capped at the rate that makes an idle network reproduce that
// time, so collectives and transfers sharing links slow each other through the flow model:
//   ring      — one ring per NIC rail across nodes (node orders alternating so each inter-node hop
//               stays on one rail), inside a node one ring; each GPU sends its share to its neighbour;
//   tree      — all-reduce: a chain inside each node and a double binary tree across nodes;
//   nvls      — all-reduce (one node): reduction in the NVSwitch (NVLink SHARP);
//   nvls-tree — all-reduce across nodes: in-switch reduce-scatter, rail rings, in-switch all-gather;
//   pat       — all-gather and reduce-scatter with one GPU per node (flows shaped as a ring);
//   direct    — all-to-all (every pair) and send/recv.
// Elsewhere (CPU workers, GPUs NCCL does not run) the plan follows the links alone: each flow at link
// speed, paying its route's latency per step, and `auto` picks the least alpha-beta time.
// A plan is a sequence of steps; the flows of a step run together, the next starts when all have
// been delivered. The analytical time of a step is its most loaded link's bytes over capacity or its
// slowest flow at its cap, plus its largest latency; an idle network gives exactly that.
// Sizes follow nccl-tests: all-gather's size is the gathered output, reduce-scatter's the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fleetsim/ids.hpp"

namespace fleetsim {

class Cluster;
class Topology;

enum class CollectiveOp : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };

// An all-to-all is a flow from every rank to every other: over 1,024 ranks, a million flows (a 1 GiB one takes
// some 15 s to simulate; 4,096 ranks ran out of memory). Larger ones are refused before any is planned.
inline constexpr std::size_t kMaxAllToAllRanks = 1024;
enum class CollectiveAlgo : std::uint8_t { automatic, ring, tree, nvls, nvls_tree, pat, direct };
// NCCL's protocols: LL (8-byte stores with flags), LL128 (128-byte lines), Simple (bulk copies).
enum class CollectiveProto : std::uint8_t { automatic, ll, ll128, simple };

std::string_view collective_op_name(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view name);
std::string_view collective_algo_name(CollectiveAlgo algo);
std::optional<CollectiveAlgo> parse_collective_algo(std::string_view name);
std::string_view collective_proto_name(CollectiveProto proto);  // "LL", "LL128", "Simple"
std::optional<CollectiveProto> parse_collective_proto(std::string_view name);  // case-insensitive

// nccl-tests' bus bandwidth factor: busbw = algbw * factor (2(n-1)/n for all-reduce, ...).
double bus_bandwidth_factor(CollectiveOp op, std::size_t ranks);

struct CollectiveFlow {
  std::uint32_t from, to;  // topology vertices
  double bytes;
  double latency_s;  // paid once, after its last byte (pipeline fill of all its steps)
  double cap_Bps = std::numeric_limits<double>::infinity();  // the most the protocol moves it at
  // Its route's links, kept in the plan (CollectivePlan::route): walked once when the plan is made.
  std::uint32_t route_begin = 0, route_size = 0;
};

struct NcclConstants;

struct CollectivePlan {
  CollectiveOp op;
  CollectiveAlgo algo;
  CollectiveProto proto = CollectiveProto::automatic;  // automatic: planned on the links alone
  int channels = 0;
  double nccl_s = 0;  // NCCL's own estimate of the time, which it chose by (0 on the links alone)
  std::vector<std::vector<CollectiveFlow>> steps;
  // Every flow's route, one after another. Timing a plan reads them from here: a 1,024-rank
  // all-to-all has a million routes, and asking the topology for each again (for the alpha-beta
  // time, NCCL's fit and the flow model) cost more than the flows themselves.
  std::vector<std::uint32_t> route_links;

  std::span<const std::uint32_t> route(const CollectiveFlow& f) const { return {route_links.data() + f.route_begin, f.route_size}; }
  // Appends `other`'s steps to this plan's, step by step (groups of a collective that run together).
  void run_beside(const CollectivePlan& other);
};

// `gpus` grouped by node: nodes in order of first appearance, each node's GPUs in the order given.
std::vector<std::vector<GpuId>> gpus_by_node(const Cluster& cluster, std::span<const GpuId> gpus);

// Whether `algo` can run `op` on these GPUs (with NCCL: whether NCCL has an entry for it).
bool algorithm_applies(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                       std::span<const GpuId> gpus);

// The plan of `op` on `gpus` (in rank order) for `bytes`, restricted to `algo` and `proto` unless
// they are automatic. `nccl`: constants in place of models/nccl.json. Throws std::invalid_argument
// when nothing allowed can run it.
CollectivePlan plan_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                               std::span<const GpuId> gpus, double bytes,
                               CollectiveProto proto = CollectiveProto::automatic,
                               const std::shared_ptr<const NcclConstants>& nccl = nullptr);

// The alpha-beta time of a plan on an otherwise idle network.
double analytical_time_s(const Topology& topo, const CollectivePlan& plan);

// Plans started together at time 0 through the flow model (max-min sharing, each step by step),
// so that collectives on shared links slow each other; returns each plan's finish time. Where
// times_at_bounds_s has them, they are its (the same, to the bit), unless `every_flow` asks for the model's
// events all the same (tests compare the two).
enum class FlowEvents : std::uint8_t { skip_where_never_full, every_flow };
std::vector<double> simulated_times_s(const Topology& topo, std::span<const CollectivePlan> plans,
                                      FlowEvents events = FlowEvents::skip_where_never_full);
// The flow model's times without its events, where no flow ever gives up rate to another: when the plans' flows,
// every step of every plan in flight at once, each at its bound (its cap or the least capacity of its route), load
// no link that two of them (or one twice) cross to within 1e-9 of its capacity. No value otherwise. A 1,024-rank
// all-to-all shaped onto NCCL's estimate is a million such flows (reports/performance.md section 23).
std::optional<std::vector<double>> times_at_bounds_s(const Topology& topo, std::span<const CollectivePlan> plans);
// One plan alone.
double simulated_time_s(const Topology& topo, const CollectivePlan& plan);

// One row of an nccl-tests-style sweep: algbw = bytes / time; busbw = algbw * bus factor.
struct CollectivePoint {
  double bytes = 0;
  CollectiveAlgo algo = CollectiveAlgo::ring;
  CollectiveProto proto = CollectiveProto::automatic;
  int channels = 0;
  double time_s = 0;          // flow model
  double analytical_s = 0;    // alpha-beta
  double nccl_s = 0;          // NCCL's own estimate (0 on the links alone)
  double algbw_Bps = 0;
  double busbw_Bps = 0;
};

// Sizes from min_bytes to max_bytes, multiplied by `factor` each step (nccl-tests' -b, -e, -f).
std::vector<CollectivePoint> sweep_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op,
                                              CollectiveAlgo algo, std::span<const GpuId> gpus, double min_bytes,
                                              double max_bytes, double factor,
                                              CollectiveProto proto = CollectiveProto::automatic,
                                              const std::shared_ptr<const NcclConstants>& nccl = nullptr);
// One point at `bytes`.
CollectivePoint collective_point(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                                 std::span<const GpuId> gpus, double bytes,
                                 CollectiveProto proto = CollectiveProto::automatic,
                                 const std::shared_ptr<const NcclConstants>& nccl = nullptr);

}  // namespace fleetsim
