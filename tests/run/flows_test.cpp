// The flows component alone: tags that say what a flow carries, one wake-up at the next delivery (stale
// generations skipped), and flows moved off a failed cable or stranded where none is left.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/events.hpp"
#include "run/flows.hpp"

using namespace fleetsim;
using run::FlowKind;
using run::FlowTag;

namespace {

// Two 1-GPU nodes under one switch: one NIC cable each.
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        topology(cluster, sc.cluster.fabric),
        network(topology.capacities()),
        flows(topology, network, queue) {}
  Scenario sc;
  Cluster cluster;
  Topology topology;
  Network network;
  EventQueue queue;
  run::Flows flows;
};

}  // namespace

TEST_CASE("a flow tag packs what the flow carries and for which task", "[run][flows]") {
  const FlowTag tag{FlowKind::offload, 0xABCDEF, make_id<TaskId>(123456)};
  const FlowTag back = FlowTag::of(tag.packed());
  CHECK(back.kind == FlowKind::offload);
  CHECK(back.part == 0xABCDEFu);
  CHECK(back.task == make_id<TaskId>(123456));
}

TEST_CASE("one wake-up at the next delivery, stale ones skipped", "[run][flows]") {
  Fixture f;
  const FlowTag a{FlowKind::input, 0, make_id<TaskId>(1)};
  REQUIRE(f.flows.start(a, 0, 1, 1e9, 7));
  f.flows.arm();
  REQUIRE(f.queue.size() == 1);
  const Event first = f.queue.top();
  CHECK(first.kind == run::kNetwork);
  // A second, smaller flow delivers first: a new generation, and the first wake-up goes stale.
  REQUIRE(f.flows.start({FlowKind::weights, 0, make_id<TaskId>(2)}, 0, 1, 1e6, 7));
  f.flows.arm();
  REQUIRE(f.queue.size() == 2);
  CHECK(f.queue.top().time_s < first.time_s);
  // The wake-ups as a run handles them: deliveries in order, the superseded one skipped.
  std::vector<TaskId> order;
  std::size_t stale = 0;
  while (!f.queue.empty()) {
    const Event e = f.queue.pop();
    if (!f.flows.wake(e.subject)) {
      ++stale;
      continue;
    }
    for (const FlowDelivery& d : f.flows.delivered()) order.push_back(FlowTag::of(d.tag).task);
    f.flows.arm();
  }
  CHECK(order == std::vector<TaskId>{make_id<TaskId>(2), make_id<TaskId>(1)});
  CHECK(stale == 1);
}

TEST_CASE("a flow on a cut cable with no way around is stranded", "[run][flows]") {
  Fixture f;
  REQUIRE(f.flows.start({FlowKind::input, 3, make_id<TaskId>(4)}, 0, 1, 1e12, 7));
  const std::uint32_t cable = *f.topology.find_link("n0.nic0>switch");
  f.topology.set_link_down(cable, true);
  const auto& moved = f.flows.reroute_off(cable);
  REQUIRE(moved.size() == 1);
  CHECK(moved[0].stranded);
  CHECK(moved[0].tag.task == make_id<TaskId>(4));
  CHECK_FALSE(f.flows.start({FlowKind::input, 0, make_id<TaskId>(5)}, 0, 1, 1e9, 7));  // none to start on either
  CHECK(f.flows.rerouted() == 0);
}
