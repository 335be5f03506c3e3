// Collectives over a gang of GPUs, expressed as flows on the topology, as NCCL runs them:
//   ring  — every collective; one ring per channel (one channel per NIC across nodes), node orders
//           alternating so that each inter-node hop stays on one rail; each GPU sends its whole
//           share of the data to its ring neighbour as one pipelined flow;
//   tree  — all-reduce: a chain inside each node and a double binary tree across nodes, reduce
//           and broadcast pipelined;
//   nvls  — all-reduce on NVSwitch nodes: reduction in the switch (NVLink SHARP); across nodes,
//           an in-switch reduce-scatter, rail rings between nodes, an in-switch all-gather;
//   direct — all-to-all (every pair) and send/recv.
// A plan is a sequence of steps; the flows of a step run together, the next starts when all have
// been delivered. The analytical estimate (alpha-beta) of a step is its most loaded link's bytes over
// capacity plus its largest latency; uncontended, symmetric plans take exactly that in the flow model.
// Sizes follow nccl-tests: all-gather's size is the gathered output, reduce-scatter's the input.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fleetsim/ids.hpp"

namespace fleetsim {

class Cluster;
class Topology;

enum class CollectiveOp : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };
enum class CollectiveAlgo : std::uint8_t { automatic, ring, tree, nvls, direct };

std::string_view collective_op_name(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view name);
std::string_view collective_algo_name(CollectiveAlgo algo);
std::optional<CollectiveAlgo> parse_collective_algo(std::string_view name);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor (2(n-1)/n for all-reduce, ...).
double bus_bandwidth_factor(CollectiveOp op, std::size_t ranks);

struct CollectiveFlow {
  std::uint32_t from, to;  // topology vertices
  double bytes;
  double latency_s;  // paid once, after its last byte (pipeline fill of all its steps)
};

struct CollectivePlan {
  CollectiveOp op;
  CollectiveAlgo algo;
  std::vector<std::vector<CollectiveFlow>> steps;
};

// Whether `algo` can run `op` on these GPUs (nvls needs every GPU on an NVSwitch node).
bool algorithm_applies(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                       std::span<const GpuId> gpus);

// The plan of `op` on `gpus` (in rank order) for `bytes`. `automatic` picks the applicable algorithm
// with the lowest analytical time, as NCCL's tuner does. Throws std::invalid_argument when the
// algorithm does not apply.
CollectivePlan plan_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                               std::span<const GpuId> gpus, double bytes);

// The alpha-beta time of a plan on an otherwise idle network.
double analytical_time_s(const Topology& topo, const CollectivePlan& plan);

// Plans started together at time 0 through the flow model (max-min sharing, each step by step),
// so that collectives on shared links slow each other; returns each plan's finish time.
std::vector<double> simulated_times_s(const Topology& topo, std::span<const CollectivePlan> plans);
// One plan alone.
double simulated_time_s(const Topology& topo, const CollectivePlan& plan);

// One row of an nccl-tests-style sweep: algbw = bytes / time; busbw = algbw * bus factor.
struct CollectivePoint {
  double bytes = 0;
  CollectiveAlgo algo = CollectiveAlgo::ring;
  double time_s = 0;          // flow model
  double analytical_s = 0;    // alpha-beta
  double algbw_Bps = 0;
  double busbw_Bps = 0;
};

// Sizes from min_bytes to max_bytes, multiplied by `factor` each step (nccl-tests' -b, -e, -f).
std::vector<CollectivePoint> sweep_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op,
                                              CollectiveAlgo algo, std::span<const GpuId> gpus, double min_bytes,
                                              double max_bytes, double factor);

}  // namespace fleetsim
