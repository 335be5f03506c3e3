// Network model throughput: flow starts + ends per second on fat-trees of 8-GPU H100 nodes (8 NDR
// NICs each, 16 nodes per leaf, 2:1 oversubscribed) with a fixed number of flows in flight between
// random GPUs of different nodes. Whenever a flow is delivered, a new one starts, so every event
// reshapes the max-min allocation of the flows it shares links with.
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
  explicit FatTree(int nodes) : spec(make_spec(nodes)), cluster(spec), topology(cluster, spec.fabric) {}
  static fleetsim::ClusterSpec make_spec(int nodes) {
    fleetsim::ClusterSpec s = fleetsim::cluster_of("hgx-h100-8", nodes);
    s.fabric.kind = fleetsim::FabricKind::fat_tree;
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

}  // namespace
