// The weight-loads component alone: a node reads a model from storage the first time, then from host
// memory; a peer GPU of the node that holds it is the source when its route is at least as fast.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/weight_loads.hpp"

using namespace fleetsim;

namespace {

// One node of two unit GPUs (NVLink between them, PCIe to the host), with storage.
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}],
                                              "storage": {"bandwidth": "10 GB/s", "latency": "100 us"}},
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        topology(cluster, sc.cluster.fabric),
        memory({100e9, 100e9}),
        loads(cluster, topology, memory, trace) {}
  // Takes the VRAM as the run does before a load.
  bool admit(GpuId g, std::uint32_t model) { return memory.admit(g, model, 10e9, 0, 0); }
  Scenario sc;
  Cluster cluster;
  Topology topology;
  GpuMemory memory;
  Trace trace;
  run::WeightLoads loads;
  const GpuId g0 = make_id<GpuId>(0), g1 = make_id<GpuId>(1);
  const NodeId node = make_id<NodeId>(0);
  const TaskId task = make_id<TaskId>(0);
};

constexpr std::uint32_t kModel = 7, kOther = 8;

}  // namespace

TEST_CASE("a node reads a model from storage once, host memory keeps it until the node loses it", "[run][weights]") {
  Fixture f;
  REQUIRE(f.admit(f.g0, kModel));
  CHECK(f.loads.begin(1, f.task, f.g0, kModel, 10e9, 2.0) == *f.topology.storage_vertex(f.node));
  REQUIRE(f.trace.weight_loads.size() == 1);
  CHECK(f.trace.weight_loads[0].from_storage);
  CHECK_FALSE(f.trace.weight_loads[0].peer);
  CHECK(f.trace.weight_loads[0].start_s == 2.0);
  CHECK_FALSE(f.loads.in_host(f.node, kModel));
  f.loads.delivered(1, kModel, 3.5);
  CHECK(f.trace.weight_loads[0].end_s == 3.5);
  CHECK(f.memory.loaded(f.g0, kModel));
  CHECK(f.loads.in_host(f.node, kModel));
  f.loads.host_lost(f.node);
  CHECK_FALSE(f.loads.in_host(f.node, kModel));
}

TEST_CASE("a peer GPU holding the weights is the source when its route is as fast as the host's", "[run][weights]") {
  Fixture f;
  REQUIRE(f.admit(f.g0, kModel));
  f.loads.begin(1, f.task, f.g0, kModel, 10e9, 0);
  REQUIRE(f.admit(f.g1, kModel));
  // Still loading on g0: no peer yet, so storage again.
  CHECK(f.loads.begin(2, f.task, f.g1, kModel, 10e9, 0) == *f.topology.storage_vertex(f.node));
  f.loads.delivered(1, kModel, 1);
  f.loads.cancelled(2, 1);
  CHECK(f.loads.begin(3, f.task, f.g1, kModel, 10e9, 1) == f.topology.gpu_vertex(f.g0));
  CHECK(f.trace.weight_loads.back().peer == std::optional(f.g0));
  CHECK_FALSE(f.trace.weight_loads.back().from_storage);
}

TEST_CASE("a cancelled load ends where it was and keeps nothing in host memory", "[run][weights]") {
  Fixture f;
  REQUIRE(f.admit(f.g1, kOther));
  f.loads.begin(5, f.task, f.g1, kOther, 10e9, 0);
  CHECK(f.loads.cancelled(5, 0.25) == f.g1);
  CHECK(f.trace.weight_loads[0].end_s == 0.25);
  CHECK_FALSE(f.loads.in_host(f.node, kOther));
  CHECK_FALSE(f.memory.loaded(f.g1, kOther));
}
