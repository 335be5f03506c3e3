// Network model throughput: flow starts + ends per second on fat-trees of 8-GPU H100 nodes (8 NDR
// NICs each, 16 nodes per leaf, 2:1 oversubscribed) with a fixed number of flows in flight between
// random GPUs of different nodes. Whenever a flow is delivered, a new one starts, so every event
// reshapes the max-min allocation of the flows it shares links with. And routes per second between
// random GPUs, from the fabric's structure and from searches of its graph.
#include <benchmark/benchmark.h>

#include "fleetsim/cluster.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/topology.hpp"

namespace {

struct FatTree {
  fleetsim::ClusterSpec spec;
  fleetsim::Cluster cluster;
  fleetsim::Topology topology;
  explicit FatTree(int nodes, fleetsim::FabricKind kind = fleetsim::FabricKind::fat_tree)
      : spec(make_spec(nodes, kind)), cluster(spec), topology(cluster, spec.fabric) {}
  static fleetsim::ClusterSpec make_spec(int nodes, fleetsim::FabricKind kind) {
    fleetsim::ClusterSpec s = fleetsim::cluster_of("hgx-h100-8", nodes);
    s.fabric.kind = kind;
    s.fabric.nodes_per_leaf = 16;
    s.fabric.oversubscription = 2.0;
    return s;
  }
};

// Args: flows in flight, nodes.
void BM_NetworkFlowsFatTree(benchmark::State& state) {
  const auto in_flight = static_cast<std::size_t>(state.range(0));
  const auto nodes = static_cast<int>(state.range(1));
  const FatTree tree(nodes);
  const auto gpus = static_cast<std::uint32_t>(nodes * 8);
  fleetsim::Rng rng(1, 0, "network-bench");
  // Routes drawn up front: this measures the flow model, not route search.
  std::vector<std::vector<std::uint32_t>> routes(4096);
  for (std::size_t i = 0; i < routes.size(); ++i) {
    std::uint32_t a, b;
    do {
      a = static_cast<std::uint32_t>(rng.next() % gpus);
      b = static_cast<std::uint32_t>(rng.next() % gpus);
    } while (a / 8 == b / 8);
    tree.topology.route(a, b, i, routes[i]);
  }
  std::vector<double> sizes(4096);
  for (double& s : sizes) s = 1e6 + rng.exponential(1.0 / 64e6);  // mean ~65 MB

  fleetsim::Network net(tree.topology.capacities());
  std::size_t next = 0;
  for (std::size_t i = 0; i < in_flight; ++i, ++next) net.start(routes[next % 4096], sizes[next % 4096], 2e-6, 0, 0.0);
  std::vector<fleetsim::FlowDelivery> delivered;
  std::uint64_t changes = 0;
  for (auto _ : state) {
    const double t = net.next_time();
    delivered.clear();
    net.advance(t, delivered);
    for (std::size_t i = 0; i < delivered.size(); ++i, ++next) {
      net.start(routes[next % 4096], sizes[next % 4096], 2e-6, 0, t);
    }
    changes += 2 * delivered.size();  // one end and one start each
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(changes));
  state.counters["flows"] = static_cast<double>(in_flight);
  state.counters["gpus"] = static_cast<double>(gpus);
}
// 1,024 GPUs under growing contention, then 256 flows on growing clusters.
BENCHMARK(BM_NetworkFlowsFatTree)
    ->Args({16, 128})->Args({128, 128})->Args({1024, 128})
    ->Args({256, 16})->Args({256, 32})->Args({256, 64})->Args({256, 128})
    ->Unit(benchmark::kMicrosecond);

// A fork: one GPU sends a transfer to each of `fanout` GPUs of other nodes at once, each of another size. They
// share its NIC and end one by one, and each end raises the rate of all the others still on it: every end
// re-levels them (the fork-join DAGs of the SimGrid comparison; reports/performance.md sections 9 and 29). When the
// last is delivered the fork starts again. Items: flow ends.
// Args: fan-out.
void BM_NetworkForkJoin(benchmark::State& state) {
  const auto fanout = static_cast<std::uint32_t>(state.range(0));
  const FatTree tree(static_cast<int>(fanout / 8 + 2));
  std::vector<std::vector<std::uint32_t>> routes(fanout);
  std::vector<double> sizes(fanout);
  for (std::uint32_t i = 0; i < fanout; ++i) {
    tree.topology.route(tree.topology.gpu_vertex(fleetsim::make_id<fleetsim::GpuId>(0)),
                        tree.topology.gpu_vertex(fleetsim::make_id<fleetsim::GpuId>(8 + i)), i, routes[i]);
    sizes[i] = 64e6 * (1.0 + static_cast<double>(i) / fanout);  // 64 to 128 MB: no two end together
  }
  fleetsim::Network net(tree.topology.capacities());
  std::vector<fleetsim::FlowDelivery> delivered;
  std::uint64_t ends = 0;
  double t = 0;
  for (auto _ : state) {
    if (net.flows_in_flight() == 0) {
      for (std::uint32_t i = 0; i < fanout; ++i) net.start(routes[i], sizes[i], 2e-6, i, t);
    }
    t = net.next_time();
    delivered.clear();
    net.advance(t, delivered);
    ends += delivered.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ends));
  const fleetsim::Network::SolveCounts& solves = net.solve_counts();
  state.counters["solved_per_relevel"] = solves.relevellings > 0 ? static_cast<double>(solves.flows_solved) / static_cast<double>(solves.relevellings) : 0.0;
}
BENCHMARK(BM_NetworkForkJoin)->Arg(16)->Arg(63)->Arg(255)->Unit(benchmark::kMicrosecond);

// Args: nodes (8 GPUs each), rail-optimized (1) or fat-tree (0), graph search (1) or structure (0). Each
// route is between random GPUs of different nodes, walked without the memo (a pair whose route is the same
// under every key would be remembered); the set-up (the structure's shapes, or the graph's switch-by-switch
// table) is paid before timing starts.
void BM_Routes(benchmark::State& state) {
  const auto nodes = static_cast<int>(state.range(0));
  FatTree fabric(nodes, state.range(1) != 0 ? fleetsim::FabricKind::rail_optimized : fleetsim::FabricKind::fat_tree);
  fabric.topology.always_search_graph(state.range(2) != 0);
  const auto gpus = static_cast<std::uint32_t>(nodes * 8);
  fleetsim::Rng rng(1, 0, "route-bench");
  std::vector<std::uint32_t> route;
  fabric.topology.route(0, gpus - 1, 0, route);
  std::uint64_t key = 1;
  for (auto _ : state) {
    std::uint32_t a, b;
    do {
      a = static_cast<std::uint32_t>(rng.next() % gpus);
      b = static_cast<std::uint32_t>(rng.next() % gpus);
    } while (a / 8 == b / 8);
    route.clear();
    fabric.topology.route(a, b, ++key, route, fleetsim::Topology::RouteMemo::skip);
    benchmark::DoNotOptimize(route.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["gpus"] = static_cast<double>(gpus);
}
BENCHMARK(BM_Routes)
    ->Args({128, 0, 0})->Args({128, 0, 1})->Args({128, 1, 0})->Args({128, 1, 1})
    ->Args({12800, 0, 0})->Args({12800, 1, 0})->Args({12800, 1, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
