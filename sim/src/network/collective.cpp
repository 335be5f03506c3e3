#include "fleetsim/collective.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/topology.hpp"

namespace fleetsim {
namespace {

constexpr std::array kOpNames{"all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "all-to-all", "send-recv"};
constexpr std::array kAlgoNames{"auto", "ring", "tree", "nvls", "nvls-tree", "pat", "direct"};
constexpr std::array kProtoNames{"auto", "LL", "LL128", "Simple"};

std::uint64_t flow_key(std::uint32_t from, std::uint32_t to) { return (std::uint64_t{from} << 32) | to; }

}  // namespace

std::vector<std::vector<GpuId>> gpus_by_node(const Cluster& cluster, std::span<const GpuId> gpus) {
  std::vector<std::vector<GpuId>> groups;
  std::vector<NodeId> nodes;
  for (GpuId g : gpus) {
    const NodeId n = cluster.node_of(g);
    const auto it = std::find(nodes.begin(), nodes.end(), n);
    if (it == nodes.end()) {
      nodes.push_back(n);
      groups.push_back({g});
    } else {
      groups[static_cast<std::size_t>(it - nodes.begin())].push_back(g);
    }
  }
  return groups;
}

namespace {

double route_latency(const Topology& topo, std::uint32_t from, std::uint32_t to, std::vector<std::uint32_t>& scratch) {
  scratch.clear();
  topo.route(from, to, flow_key(from, to), scratch);
  return topo.latency_s(scratch);
}

// Adds `f` to `step` with its route kept in the plan.
CollectiveFlow& add_routed(const Topology& topo, CollectivePlan& plan, std::vector<CollectiveFlow>& step, CollectiveFlow f,
                           Topology::RouteMemo memo = Topology::RouteMemo::keep) {
  f.route_begin = static_cast<std::uint32_t>(plan.route_links.size());
  topo.route(f.from, f.to, flow_key(f.from, f.to), plan.route_links, memo);
  f.route_size = static_cast<std::uint32_t>(plan.route_links.size() - f.route_begin);
  return step.emplace_back(f);
}

// Rings, one per channel. Across nodes, channel c enters even nodes at their c-th GPU and leaves at
// the one before it, odd nodes the other way round, so every inter-node hop joins GPUs (and NICs) of
// the same local index: one rail per channel.
std::vector<std::vector<GpuId>> rings(const Cluster& cluster, std::span<const GpuId> gpus) {
  const auto nodes = gpus_by_node(cluster, gpus);
  if (nodes.size() == 1) return {std::vector<GpuId>(gpus.begin(), gpus.end())};
  std::size_t channels = std::numeric_limits<std::size_t>::max();
  for (const auto& local : nodes) {
    const auto nics = static_cast<std::size_t>(cluster.group(cluster.node_of(local[0])).node.nics);
    channels = std::min({channels, local.size(), nics});
  }
  std::vector<std::vector<GpuId>> result;
  for (std::size_t c = 0; c < channels; ++c) {
    std::vector<GpuId> ring;
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const auto& local = nodes[k];
      const std::size_t m = local.size();
      std::vector<GpuId> order;
      for (std::size_t i = 0; i < m; ++i) order.push_back(local[(c + i) % m]);
      if (k % 2 == 1) std::reverse(order.begin(), order.end());
      ring.insert(ring.end(), order.begin(), order.end());
    }
    result.push_back(std::move(ring));
  }
  return result;
}

void plan_ring(const Cluster& cluster, const Topology& topo, CollectivePlan& plan, std::span<const GpuId> gpus,
               double bytes) {
  const double n = static_cast<double>(gpus.size());
  const auto all_rings = rings(cluster, gpus);
  const double c = static_cast<double>(all_rings.size());
  std::vector<std::uint32_t> scratch;
  // One pipeline step costs the slowest hop's latency.
  double alpha = 0;
  for (const auto& ring : all_rings) {
    for (std::size_t i = 0; i < ring.size(); ++i) {
      alpha = std::max(alpha, route_latency(topo, topo.gpu_vertex(ring[i]), topo.gpu_vertex(ring[(i + 1) % ring.size()]), scratch));
    }
  }
  double per_flow = 0, steps = 0;
  bool chain = false;  // broadcast and reduce run along the ring from / to the root, not around it
  switch (plan.op) {
    case CollectiveOp::all_reduce: per_flow = 2 * (n - 1) / n * bytes / c; steps = 2 * (n - 1); break;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: per_flow = (n - 1) / n * bytes / c; steps = n - 1; break;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce: per_flow = bytes / c; steps = n - 1; chain = true; break;
    default: FLEETSIM_CHECK(false, "a ring does not run this collective");
  }
  std::vector<CollectiveFlow> flows;
  for (auto ring : all_rings) {
    if (chain) std::rotate(ring.begin(), std::find(ring.begin(), ring.end(), gpus[0]), ring.end());
    const std::size_t hops = chain ? ring.size() - 1 : ring.size();
    for (std::size_t i = 0; i < hops; ++i) {
      std::uint32_t from = topo.gpu_vertex(ring[i]), to = topo.gpu_vertex(ring[(i + 1) % ring.size()]);
      if (plan.op == CollectiveOp::reduce) std::swap(from, to);
      add_routed(topo, plan, flows, CollectiveFlow{from, to, per_flow, steps * alpha});
    }
  }
  plan.steps.push_back(std::move(flows));
}

// All-reduce: a chain inside each node (reduce up, broadcast down, pipelined) and, across nodes,
// per channel two binary trees, mirror images of each other, each carrying half the channel's data.
void plan_tree(const Cluster& cluster, const Topology& topo, CollectivePlan& plan, std::span<const GpuId> gpus,
               double bytes) {
  const auto nodes = gpus_by_node(cluster, gpus);
  const std::size_t k = nodes.size();
  std::vector<std::uint32_t> scratch;
  struct Pair {
    std::uint32_t a, b;
    double bytes;
  };
  std::vector<Pair> links;  // each becomes two flows, one each way
  double alpha_intra = 0, alpha_inter = 0;
  std::size_t chain = 0;
  for (const auto& local : nodes) {
    chain = std::max(chain, local.size() - 1);
    for (std::size_t i = 1; i < local.size(); ++i) {
      const std::uint32_t a = topo.gpu_vertex(local[i - 1]), b = topo.gpu_vertex(local[i]);
      alpha_intra = std::max(alpha_intra, route_latency(topo, a, b, scratch));
      links.push_back({a, b, bytes});
    }
  }
  std::size_t depth = 0;
  if (k > 1) {
    // One pair of trees per channel, as rings have: channel c joins the c-th GPU of every node, so
    // each channel crosses nodes on its own NIC rail.
    std::size_t channels = std::numeric_limits<std::size_t>::max();
    for (const auto& local : nodes) {
      channels = std::min({channels, local.size(), static_cast<std::size_t>(cluster.group(cluster.node_of(local[0])).node.nics)});
    }
    const double per_tree = bytes / 2 / static_cast<double>(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      auto leader = [&](std::size_t node) { return topo.gpu_vertex(nodes[node][c]); };
      for (int tree = 0; tree < 2; ++tree) {
        for (std::size_t i = 1; i < k; ++i) {
          // Tree 0 is the heap-ordered binary tree over nodes; tree 1 is the same over reversed indices.
          const std::size_t child = tree == 0 ? i : k - 1 - i;
          const std::size_t parent = tree == 0 ? (i - 1) / 2 : k - 1 - (i - 1) / 2;
          alpha_inter = std::max(alpha_inter, route_latency(topo, leader(child), leader(parent), scratch));
          links.push_back({leader(child), leader(parent), per_tree});
        }
      }
    }
    for (std::size_t i = k - 1; i > 0; i = (i - 1) / 2) ++depth;
  }
  const double latency = 2 * (static_cast<double>(chain) * alpha_intra + static_cast<double>(depth) * alpha_inter);
  std::vector<CollectiveFlow> flows;
  for (const Pair& p : links) {
    add_routed(topo, plan, flows, CollectiveFlow{p.a, p.b, p.bytes, latency});
    add_routed(topo, plan, flows, CollectiveFlow{p.b, p.a, p.bytes, latency});
  }
  plan.steps.push_back(std::move(flows));
}

// All-reduce with reduction in the NVSwitch: each GPU sends its data to the switch once and receives
// the reduced result once. Across nodes: reduce-scatter in the switch, rail rings, all-gather.
void plan_nvls(const Cluster& cluster, const Topology& topo, CollectivePlan& plan, std::span<const GpuId> gpus,
               double bytes) {
  const auto nodes = gpus_by_node(cluster, gpus);
  const double m = static_cast<double>(nodes[0].size());
  const double k = static_cast<double>(nodes.size());
  std::vector<std::uint32_t> scratch;
  auto switch_step = [&](double up_bytes, double down_bytes) {
    std::vector<CollectiveFlow> flows;
    for (const auto& local : nodes) {
      const std::uint32_t sw = *topo.nvswitch_vertex(cluster.node_of(local[0]));
      for (GpuId g : local) {
        const std::uint32_t v = topo.gpu_vertex(g);
        const double latency = route_latency(topo, v, sw, scratch) + route_latency(topo, sw, v, scratch);
        add_routed(topo, plan, flows, CollectiveFlow{v, sw, up_bytes, latency});
        add_routed(topo, plan, flows, CollectiveFlow{sw, v, down_bytes, latency});
      }
    }
    return flows;
  };
  if (nodes.size() == 1) {
    plan.steps.push_back(switch_step(bytes, bytes));
    return;
  }
  plan.steps.push_back(switch_step(bytes, bytes / m));
  std::vector<CollectiveFlow> rails;
  for (std::size_t i = 0; i < nodes[0].size(); ++i) {
    double alpha = 0;
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      alpha = std::max(alpha, route_latency(topo, topo.gpu_vertex(nodes[j][i]),
                                            topo.gpu_vertex(nodes[(j + 1) % nodes.size()][i]), scratch));
    }
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      add_routed(topo, plan, rails,
                 CollectiveFlow{topo.gpu_vertex(nodes[j][i]), topo.gpu_vertex(nodes[(j + 1) % nodes.size()][i]), 2 * (k - 1) / k * bytes / m, 2 * (k - 1) * alpha});
    }
  }
  plan.steps.push_back(std::move(rails));
  plan.steps.push_back(switch_step(bytes / m, bytes));
}

void plan_direct(const Topology& topo, CollectivePlan& plan, std::span<const GpuId> gpus, double bytes) {
  std::vector<CollectiveFlow> flows;
  const std::size_t n = gpus.size();
  flows.reserve(plan.op == CollectiveOp::all_to_all ? n * (n - 1) : n);
  // The plan keeps every route; past 256 ranks (65,536 pairs) an all-to-all's routes are left out of the
  // topology's memo, which they would fill with pairs seldom asked again (reports/performance.md section 20
  // measures it). Smaller groups, an MoE layer's, are planned again and again: their routes are kept.
  constexpr std::size_t kRememberedRanks = 256;
  const auto memo = plan.op == CollectiveOp::all_to_all && n > kRememberedRanks ? Topology::RouteMemo::skip : Topology::RouteMemo::keep;
  auto add = [&](GpuId a, GpuId b, double size) {
    CollectiveFlow& f = add_routed(topo, plan, flows, CollectiveFlow{topo.gpu_vertex(a), topo.gpu_vertex(b), size, 0}, memo);
    f.latency_s = topo.latency_s(plan.route(f));
  };
  if (plan.op == CollectiveOp::all_to_all) {
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        if (i != j) add(gpus[i], gpus[j], bytes / static_cast<double>(n));
      }
      // Room for the rest, by the first rank's routes (a million pairs' routes would otherwise be copied as they grow).
      if (i == 0) plan.route_links.reserve(plan.route_links.size() * n + n);
    }
  } else {  // send/recv, as nccl-tests runs it: each rank sends to the next
    for (std::size_t i = 0; i < n; ++i) add(gpus[i], gpus[(i + 1) % n], bytes);
  }
  plan.steps.push_back(std::move(flows));
}

// The alpha-beta time of one step: its most loaded link, or its slowest flow at its cap, plus its
// largest latency. `load` (per link) is zero before and after: only the links the step loaded are
// cleared, as a plan of hundreds of steps on a topology of many thousand links would spend its time
// clearing the rest.
struct StepScratch {
  std::vector<double> load;
  std::vector<std::uint32_t> loaded;
  explicit StepScratch(const Topology& topo) : load(topo.links().size(), 0.0) {}
};

double step_time_s(const Topology& topo, const CollectivePlan& plan, const std::vector<CollectiveFlow>& step, StepScratch& scratch,
                   bool with_latency) {
  double latency = 0, bandwidth_s = 0;
  for (const CollectiveFlow& f : step) {
    for (std::uint32_t l : plan.route(f)) {
      if (scratch.load[l] == 0) scratch.loaded.push_back(l);
      scratch.load[l] += f.bytes;
    }
    bandwidth_s = std::max(bandwidth_s, f.bytes / f.cap_Bps);
    latency = std::max(latency, f.latency_s);
  }
  // A link's load only grows, so its busiest moment is its last: one division a link, not one a hop.
  for (std::uint32_t l : scratch.loaded) {
    bandwidth_s = std::max(bandwidth_s, scratch.load[l] / topo.links()[l].capacity_Bps);
    scratch.load[l] = 0;
  }
  scratch.loaded.clear();
  return bandwidth_s + (with_latency ? latency : 0.0);
}

// Shapes NCCL's estimate onto the plan's flows: the transfer time is shared among the steps as their
// links' times are, each flow capped so that alone it takes its step's share, and the latency is paid
// once, after the last step.
void fit_to(const Topology& topo, CollectivePlan& plan, const NcclEstimate& e) {
  StepScratch scratch(topo);
  std::vector<double> link_s;
  double total = 0;
  for (const auto& step : plan.steps) {
    link_s.push_back(step_time_s(topo, plan, step, scratch, false));
    total += link_s.back();
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const double share = total > 0 ? e.transfer_s * link_s[i] / total : 0;
    for (CollectiveFlow& f : plan.steps[i]) {
      f.latency_s = i + 1 == plan.steps.size() ? e.latency_s : 0.0;
      if (share > 0 && f.bytes > 0) f.cap_Bps = f.bytes / share;
    }
  }
}

bool pairwise(CollectiveOp op) { return op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv; }

// On the links alone: which algorithms run which collectives.
bool links_apply(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                 std::span<const GpuId> gpus) {
  switch (algo) {
    case CollectiveAlgo::automatic: return true;
    case CollectiveAlgo::ring: return !pairwise(op);
    case CollectiveAlgo::direct: return pairwise(op);
    case CollectiveAlgo::tree: return op == CollectiveOp::all_reduce;
    case CollectiveAlgo::nvls: {
      if (op != CollectiveOp::all_reduce) return false;
      const auto nodes = gpus_by_node(cluster, gpus);
      for (const auto& local : nodes) {
        const NodeId node = cluster.node_of(local[0]);
        if (!topo.nvswitch_vertex(node) || !cluster.group(node).node.nvls || local.size() != nodes[0].size()) return false;
      }
      return true;
    }
    case CollectiveAlgo::nvls_tree:
    case CollectiveAlgo::pat: return false;
  }
  return false;
}

// The flows of `algo`'s shape.
void add_flows(const Cluster& cluster, const Topology& topo, CollectivePlan& plan, CollectiveAlgo algo,
               std::span<const GpuId> gpus, double bytes) {
  switch (algo) {
    case CollectiveAlgo::ring:
    case CollectiveAlgo::pat: plan_ring(cluster, topo, plan, gpus, bytes); break;
    case CollectiveAlgo::tree: plan_tree(cluster, topo, plan, gpus, bytes); break;
    case CollectiveAlgo::nvls:
    case CollectiveAlgo::nvls_tree: plan_nvls(cluster, topo, plan, gpus, bytes); break;
    case CollectiveAlgo::direct: plan_direct(topo, plan, gpus, bytes); break;
    case CollectiveAlgo::automatic: break;
  }
}

}  // namespace

std::string_view collective_op_name(CollectiveOp op) { return kOpNames[static_cast<std::size_t>(op)]; }
std::string_view collective_algo_name(CollectiveAlgo algo) { return kAlgoNames[static_cast<std::size_t>(algo)]; }
std::string_view collective_proto_name(CollectiveProto proto) { return kProtoNames[static_cast<std::size_t>(proto)]; }

std::optional<CollectiveOp> parse_collective_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (name == kOpNames[i]) return static_cast<CollectiveOp>(i);
  }
  return std::nullopt;
}

std::optional<CollectiveAlgo> parse_collective_algo(std::string_view name) {
  for (std::size_t i = 0; i < kAlgoNames.size(); ++i) {
    if (name == kAlgoNames[i]) return static_cast<CollectiveAlgo>(i);
  }
  return std::nullopt;
}

std::optional<CollectiveProto> parse_collective_proto(std::string_view name) {
  for (std::size_t i = 0; i < kProtoNames.size(); ++i) {
    const std::string_view known = kProtoNames[i];
    if (name.size() == known.size() &&
        std::equal(name.begin(), name.end(), known.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return static_cast<CollectiveProto>(i);
    }
  }
  return std::nullopt;
}

double bus_bandwidth_factor(CollectiveOp op, std::size_t ranks) {
  const double n = static_cast<double>(ranks);
  switch (op) {
    case CollectiveOp::all_reduce: return 2 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all: return (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::send_recv: return 1.0;
  }
  return 1.0;
}

void CollectivePlan::run_beside(const CollectivePlan& other) {
  const auto shift = static_cast<std::uint32_t>(route_links.size());
  route_links.insert(route_links.end(), other.route_links.begin(), other.route_links.end());
  if (other.steps.size() > steps.size()) steps.resize(other.steps.size());
  for (std::size_t k = 0; k < other.steps.size(); ++k) {
    for (CollectiveFlow f : other.steps[k]) {
      f.route_begin += shift;
      steps[k].push_back(f);
    }
  }
}

bool algorithm_applies(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                       std::span<const GpuId> gpus) {
  if (algo == CollectiveAlgo::automatic) return true;
  if (const auto comm = nccl_comm(cluster, gpus)) {
    return comm->ranks <= 1 ? links_apply(cluster, topo, op, algo, gpus) : NcclModel(*comm).estimate(op, 1, algo).has_value();
  }
  return links_apply(cluster, topo, op, algo, gpus);
}

CollectivePlan plan_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                               std::span<const GpuId> gpus, double bytes, CollectiveProto proto,
                               const std::shared_ptr<const NcclConstants>& nccl) {
  if (gpus.empty()) throw std::invalid_argument("a collective needs at least one GPU");
  // A flow of NaN or infinite bytes would never finish in the flow model.
  if (!std::isfinite(bytes) || bytes < 0) {
    throw std::invalid_argument(std::string(collective_op_name(op)) + " over " + std::to_string(gpus.size()) + " GPUs: a collective's bytes must be finite and not negative, found " +
                                std::to_string(bytes));
  }
  auto refuse = [&] {
    std::string what = std::string(collective_algo_name(algo));
    if (proto != CollectiveProto::automatic) what += " with " + std::string(collective_proto_name(proto));
    throw std::invalid_argument(what + " cannot run " + std::string(collective_op_name(op)) + " on these GPUs");
  };
  if (const auto comm = nccl_comm(cluster, gpus); comm && gpus.size() > 1) {
    const NcclModel model(*comm, nccl ? nccl : builtin_nccl_constants());
    const auto e = model.estimate(op, bytes, algo, proto);
    if (!e) refuse();
    CollectivePlan plan{op, e->algo, e->proto, e->channels, e->nccl_s, {}, {}};
    add_flows(cluster, topo, plan, e->algo, gpus, bytes);
    // NCCL pipelines an algorithm's phases (NVLS tree: reduce in the switch, between nodes, gather in
    // the switch) chunk by chunk, so every link works at once: one step.
    for (std::size_t i = 1; i < plan.steps.size(); ++i) {
      plan.steps[0].insert(plan.steps[0].end(), plan.steps[i].begin(), plan.steps[i].end());
    }
    plan.steps.resize(std::min<std::size_t>(plan.steps.size(), 1));
    fit_to(topo, plan, *e);
    return plan;
  }
  if (proto != CollectiveProto::automatic) refuse();
  if (algo == CollectiveAlgo::automatic) {
    std::optional<CollectivePlan> best;
    double best_s = 0;
    for (CollectiveAlgo a : {CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::direct}) {
      if (!links_apply(cluster, topo, op, a, gpus)) continue;
      CollectivePlan p = plan_collective(cluster, topo, op, a, gpus, bytes);
      const double t = analytical_time_s(topo, p);
      if (!best || t < best_s) {
        best = std::move(p);
        best_s = t;
      }
    }
    return std::move(*best);
  }
  if (!links_apply(cluster, topo, op, algo, gpus)) refuse();
  CollectivePlan plan{op, algo, CollectiveProto::automatic, 0, 0, {}, {}};
  if (gpus.size() == 1) return plan;  // nothing to exchange
  add_flows(cluster, topo, plan, algo, gpus, bytes);
  return plan;
}

double analytical_time_s(const Topology& topo, const CollectivePlan& plan) {
  StepScratch scratch(topo);
  double total = 0;
  for (const auto& step : plan.steps) total += step_time_s(topo, plan, step, scratch, true);
  return total;
}

// Whatever subset of the flows is in flight, every one runs at its bound from start to end: the network's max-min
// gives exactly that, the flow's narrowest link being its alone and the shared links keeping more room than the
// rounding of their loads (1e-9 of the capacity against a million flows' 1e-10; more past some two million crossings). A flow then ends at start +
// bytes / bound and is delivered its latency later, and a step starts when its plan's previous step's last flow is
// delivered, as simulated_times_s's loop has it, to the bit. That rests on how the network re-levels: a flow that
// keeps a bottleneck (here, its cap or its own narrowest link) is not re-solved, and one whose rate did not change
// keeps its due time (Network::reshare_incremental); tests/network_test.cpp holds the two paths to the bit.
std::optional<std::vector<double>> times_at_bounds_s(const Topology& topo, std::span<const CollectivePlan> plans) {
  const std::vector<TopoLink>& links = topo.links();
  std::vector<double> demand(links.size(), 0.0);
  std::vector<std::uint32_t> crossings(links.size(), 0);
  const auto bound_of = [&](const CollectivePlan& plan, const CollectiveFlow& f) {
    double bound = f.cap_Bps;
    for (std::uint32_t l : plan.route(f)) bound = std::min(bound, links[l].capacity_Bps);
    return bound;
  };
  for (const CollectivePlan& plan : plans) {
    for (const auto& step : plan.steps) {
      for (const CollectiveFlow& f : step) {
        if (!(f.cap_Bps > 0)) return std::nullopt;  // the network refuses it
        if (f.route_size == 0 || f.bytes <= 0) continue;
        const double bound = bound_of(plan, f);
        for (std::uint32_t l : plan.route(f)) {
          demand[l] += bound;
          ++crossings[l];
        }
      }
    }
  }
  for (std::size_t l = 0; l < links.size(); ++l) {
    // Room beyond the rounding of the network's sum of the rates on it: a few ulps a crossing, 1e-9 of it at least.
    const double room = std::max(1e-9, 4e-16 * crossings[l]);
    if (crossings[l] > 1 && demand[l] >= links[l].capacity_Bps * (1 - room)) return std::nullopt;
  }
  std::vector<double> finish(plans.size(), 0.0);
  for (std::size_t p = 0; p < plans.size(); ++p) {
    double now = 0;
    for (const auto& step : plans[p].steps) {
      if (step.empty()) continue;
      double last = now;
      for (const CollectiveFlow& f : step) {
        const double sent = f.route_size == 0 || f.bytes <= 0 ? now : now + f.bytes / bound_of(plans[p], f);
        last = std::max(last, sent + f.latency_s);
      }
      now = last;
    }
    finish[p] = now;
  }
  return finish;
}

std::vector<double> simulated_times_s(const Topology& topo, std::span<const CollectivePlan> plans, FlowEvents events) {
  if (events == FlowEvents::skip_where_never_full) {
    if (auto times = times_at_bounds_s(topo, plans)) return std::move(*times);
  }
  Network net(topo.capacities());
  std::vector<FlowDelivery> delivered;
  std::vector<std::size_t> step(plans.size(), 0), pending(plans.size(), 0);
  std::vector<double> finish(plans.size(), 0.0);
  std::size_t most = 0;  // in flight at once: each plan's largest step
  for (const CollectivePlan& plan : plans) {
    std::size_t largest = 0;
    for (const auto& s : plan.steps) largest = std::max(largest, s.size());
    most += largest;
  }
  net.reserve(most);
  double now = 0;
  auto start_step = [&](std::size_t p) {
    while (step[p] < plans[p].steps.size() && plans[p].steps[step[p]].empty()) ++step[p];
    if (step[p] == plans[p].steps.size()) {
      finish[p] = now;
      return;
    }
    for (const CollectiveFlow& f : plans[p].steps[step[p]]) {
      net.start(plans[p].route(f), f.bytes, f.latency_s, p, now, f.cap_Bps);
      ++pending[p];
    }
    ++step[p];
  };
  for (std::size_t p = 0; p < plans.size(); ++p) start_step(p);
  while (net.flows_in_flight() > 0) {
    now = net.next_time();
    delivered.clear();
    net.advance(now, delivered);
    for (const FlowDelivery& d : delivered) {
      if (--pending[d.tag] == 0) start_step(d.tag);
    }
  }
  return finish;
}

double simulated_time_s(const Topology& topo, const CollectivePlan& plan) {
  return simulated_times_s(topo, std::span<const CollectivePlan>(&plan, 1))[0];
}

CollectivePoint collective_point(const Cluster& cluster, const Topology& topo, CollectiveOp op, CollectiveAlgo algo,
                                 std::span<const GpuId> gpus, double bytes, CollectiveProto proto,
                                 const std::shared_ptr<const NcclConstants>& nccl) {
  const CollectivePlan plan = plan_collective(cluster, topo, op, algo, gpus, bytes, proto, nccl);
  CollectivePoint p;
  p.bytes = bytes;
  p.algo = plan.algo;
  p.proto = plan.proto;
  p.channels = plan.channels;
  p.time_s = simulated_time_s(topo, plan);
  p.analytical_s = analytical_time_s(topo, plan);
  p.nccl_s = plan.nccl_s;
  p.algbw_Bps = p.time_s > 0 ? bytes / p.time_s : 0;
  p.busbw_Bps = p.algbw_Bps * bus_bandwidth_factor(op, gpus.size());
  return p;
}

std::vector<CollectivePoint> sweep_collective(const Cluster& cluster, const Topology& topo, CollectiveOp op,
                                              CollectiveAlgo algo, std::span<const GpuId> gpus, double min_bytes,
                                              double max_bytes, double factor, CollectiveProto proto,
                                              const std::shared_ptr<const NcclConstants>& nccl) {
  if (!(factor > 1) || !(min_bytes > 0) || max_bytes < min_bytes) {
    throw std::invalid_argument("a sweep needs 0 < min <= max and a factor above 1");
  }
  std::vector<CollectivePoint> points;
  for (double bytes = min_bytes; bytes <= max_bytes * (1 + 1e-12); bytes *= factor) {
    points.push_back(collective_point(cluster, topo, op, algo, gpus, bytes, proto, nccl));
  }
  return points;
}

}  // namespace fleetsim
