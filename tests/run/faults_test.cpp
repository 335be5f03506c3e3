// The faults component alone: one table of sources (scripted events, then each cable, GPU, node and
// spot node), what each failure covers, and that repairs and the next random failure are scheduled
// only within the horizon.
#include <catch2/catch.hpp>

#include <limits>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/events.hpp"
#include "run/faults.hpp"

using namespace fleetsim;
using Kind = run::FaultSource::Kind;

namespace {

// Two 2-GPU nodes under a two-spine fat-tree, the second one spot.
struct Fixture {
  explicit Fixture(const std::string& faults_json)
      : sc(test::unit_scenario(R"("horizon": "1 h", "cluster": {"nodes": [{"type": "unit-node-2", "count": 2}],
                                "fabric": {"topology": "fat-tree", "nodes_per_leaf": 1, "spines": 2}},
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
          "spot": {"nodes": 1, "price_factor": 0.5, "mtbp": "10 min", "restock": "1 min"},
          "faults": )" + faults_json)),
        cluster(sc.cluster),
        topology(cluster, sc.cluster.fabric),
        occupancy(sc, cluster, trace, round_wanted),
        faults(sc, cluster, topology, occupancy, sc.seed, queue) {}
  Scenario sc;
  Cluster cluster;
  Topology topology;
  Trace trace;
  EventQueue queue;
  bool round_wanted = false;
  run::Occupancy occupancy;
  run::Faults faults;
};

}  // namespace

TEST_CASE("fault sources are one table: scripted events, then cables, GPUs, nodes and spot nodes", "[run][faults]") {
  Fixture f(R"({"events": [{"at": "1 s", "node": "n0", "for": "5 s"}, {"at": "2 s", "link": "leaf0>spine1"}],
               "gpu": {"mtbf": "1 h", "mttr": "1 min"}, "node": {"mtbf": "10 h", "mttr": "1 min"}, "link": {"mtbf": "1 h", "mttr": "1 min"}})");
  const auto& sources = f.faults.sources();
  std::vector<Kind> kinds;
  for (const auto& s : sources) kinds.push_back(s.kind);
  // 2 scripted; 6 cables (2 NIC cables, 4 leaf-spine); 4 GPUs; 2 nodes; 1 spot node.
  REQUIRE(sources.size() == 2 + 6 + 4 + 2 + 1);
  CHECK(std::count(kinds.begin(), kinds.end(), Kind::cable) == 6);
  CHECK(kinds.front() == Kind::scripted);
  CHECK(kinds[8] == Kind::gpu);
  CHECK(kinds[12] == Kind::node);
  CHECK(kinds.back() == Kind::spot);
  CHECK(sources.back().target == 1);

  const run::Fault node = f.faults.repair(0);  // what the scripted node failure covers, without a draw
  CHECK(node.first_gpu == 0);
  CHECK(node.gpus == 2);
  CHECK(node.node);
  CHECK(node.event == "node n0 failed");
  CHECK(f.faults.fail(0).down_s == 5.0);
  CHECK(f.faults.fail(1).link.has_value());
  const run::Fault spot = f.faults.fail(14);
  CHECK(spot.preemption);
  CHECK(spot.event == "spot node n1 was preempted");
  CHECK(spot.down_s > 0);  // drawn with mean 1 min
}

TEST_CASE("every source schedules its first failure, and repairs are queued past the horizon too", "[run][faults]") {
  Fixture f(R"({"events": [{"at": "1 s", "gpu": "n0.g1", "for": "2 h"}, {"at": "2 h", "gpu": "n0.g0"}]})");
  f.faults.start();
  // The scripted failure at 1 s, and the spot node's first preemption; not the one past the horizon.
  REQUIRE(f.queue.size() == 2);
  Event first = f.queue.pop();
  if (first.subject != 0) first = f.queue.pop();
  CHECK(first.time_s == 1.0);
  CHECK(first.kind == run::kFault);
  const run::Fault gpu = f.faults.fail(0);
  CHECK(gpu.event == "GPU n0.g1 failed");
  const std::size_t pending = f.queue.size();
  // 2 h is past the horizon: queued anyway, so that the run ends at its horizon with the GPU still down
  // (rather than running out of events first and calling the work waiting for it stalled).
  f.faults.schedule_repair(0, gpu.down_s);
  CHECK(f.queue.size() == pending + 1);
  f.faults.schedule_repair(0, 60);
  CHECK(f.queue.size() == pending + 2);
  f.faults.schedule_repair(0, std::numeric_limits<double>::infinity());  // never repaired: nothing queued
  CHECK(f.queue.size() == pending + 2);
  f.faults.gpu_down(1, false);
  Summary summary;
  f.faults.summarize(100, summary);
  CHECK(summary.gpu_failures == 1);
}
