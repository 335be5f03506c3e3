// Network model throughput: flow starts + ends per second on a 1,024-GPU fat-tree (128 nodes of
// 8 H100s, 8 NDR NICs each, 16 nodes per leaf, 2:1 oversubscribed) with a fixed number of flows
// in flight between random GPUs of different nodes. Whenever a flow is delivered, a new one starts,
// so every event reshapes the max-min allocation of the flows it shares links with.
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
  FatTree()
      : spec(make_spec()), cluster(spec), topology(cluster, spec.fabric) {}
  static fleetsim::ClusterSpec make_spec() {
    fleetsim::ClusterSpec s = fleetsim::cluster_of("hgx-h100-8", 128);
    s.fabric.kind = fleetsim::FabricKind::fat_tree;
    s.fabric.nodes_per_leaf = 16;
    s.fabric.oversubscription = 2.0;
    return s;
  }
};

void BM_NetworkFlowsFatTree1024(benchmark::State& state) {
  static const FatTree tree;
  const auto in_flight = static_cast<std::size_t>(state.range(0));
  fleetsim::Rng rng(1, 0, "network-bench");
  // Routes drawn up front: this measures the flow model, not route search.
  std::vector<std::vector<std::uint32_t>> routes(4096);
  for (std::size_t i = 0; i < routes.size(); ++i) {
    std::uint32_t a, b;
    do {
      a = static_cast<std::uint32_t>(rng.next() % 1024);
      b = static_cast<std::uint32_t>(rng.next() % 1024);
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
}
BENCHMARK(BM_NetworkFlowsFatTree1024)->Arg(16)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
