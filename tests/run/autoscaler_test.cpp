// The autoscaler and billing components alone, driven by hand: nodes start off, come up after their
// provisioning, drain only once idle, and are billed while on.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/autoscaler.hpp"
#include "run/events.hpp"

using namespace fleetsim;

namespace {

// Three 1-GPU nodes at $1 per GPU-hour; a schedule wants 3 nodes from 10 s and 1 from 50 s.
struct Fixture {
  // `held`: GPUs a serving replica holds from the start.
  explicit Fixture(const std::vector<std::uint32_t>& held = {})
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 3}]},
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
          "autoscale": {"policy": "schedule", "schedule": [{"at": "0 s", "nodes": 1}, {"at": "10 s", "nodes": 3}, {"at": "50 s", "nodes": 1}],
                        "interval": "10 s", "period": "1000 s", "provisioning": "5 s", "scale_in_window": "0 s"})")),
        cluster(sc.cluster),
        memory(std::vector<double>(3, 1e12), 0),
        occupancy(sc, cluster, trace, round_wanted),
        billing(sc, cluster, queue, true),
        workload(sc, sc.seed, {1.0}, queue, trace),
        predicted(sc, cluster, compute),
        round(sc, run::PolicyRound::make_policy(sc), cluster, occupancy, memory, predicted, trace, queue, /*record_decisions=*/true),
        autoscaler(sc, cluster, queue, occupancy, memory, billing, [this] { return workload.unfinished() > 0; }, [this] { return serving_wants; }, round,
                   [this](std::uint32_t n) { nodes_off.push_back(n); }) {
    for (std::uint32_t g : held) occupancy.set_held(g, true);
    billing.start(0);  // the node on from the start
    billing.open_timeline();
    autoscaler.start();
  }
  // Runs events until `until_s`, the autoscaler's own ones handled as a run would.
  void run_until(double until_s) {
    while (!queue.empty() && queue.top().time_s <= until_s) {
      const Event e = queue.pop();
      if (e.kind == run::kAutoscale) autoscaler.on_decide();
      if (e.kind == run::kNodeUp) autoscaler.on_node_up(e.subject);
    }
  }

  Scenario sc;
  Cluster cluster;
  Trace trace;
  EventQueue queue;
  GpuMemory memory;
  bool round_wanted = false;
  run::Occupancy occupancy;
  run::Billing billing;
  run::Workload workload;
  ComputeModel compute;
  run::Predictions predicted;
  run::PolicyRound round;
  std::vector<std::uint32_t> nodes_off;
  std::vector<run::Serving::NodesWanted> serving_wants;  // what serving replicas ask nodes for
  run::Autoscaler autoscaler;
};

}  // namespace

TEST_CASE("an autoscaler's nodes come up after provisioning and are billed from the decision", "[run][autoscale]") {
  Fixture f;
  CHECK_FALSE(f.occupancy.off(0));
  CHECK(f.occupancy.off(1));
  CHECK(f.occupancy.off(2));
  f.run_until(10);
  CHECK(f.occupancy.off(1));  // provisioning
  f.run_until(15);
  CHECK_FALSE(f.occupancy.off(1));
  CHECK_FALSE(f.occupancy.off(2));
  const auto samples = f.billing.take_samples();
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].usd_per_hour == 1);
  CHECK(samples[1].time_s == 10);
  CHECK(samples[1].usd_per_hour == 3);
}

TEST_CASE("a draining node goes off only when its GPUs run nothing", "[run][autoscale]") {
  Fixture f;
  f.trace.tasks.push_back(TaskRecord{});
  f.trace.tasks.push_back(TaskRecord{});
  f.run_until(15);
  f.occupancy.add_task(1, 0);  // nodes 1 and 2 run a task each
  f.occupancy.add_task(2, 1);
  f.run_until(50);  // one node wanted: node 0, idle, drains first, then node 2 (the last on)
  CHECK(f.nodes_off == std::vector<std::uint32_t>{0});
  CHECK_FALSE(f.occupancy.off(2));
  f.queue.push(60, run::kSchedule, 0);
  f.run_until(60);
  f.occupancy.remove_task(2, 1);
  f.autoscaler.gpu_released(2);
  CHECK(f.nodes_off == std::vector<std::uint32_t>{0, 2});
  CHECK(f.occupancy.off(2));
  CHECK_FALSE(f.occupancy.off(1));  // not draining: it still runs its task
  Summary summary;
  f.autoscaler.summarize(100, summary);
  CHECK(summary.nodes_started == 2);
  CHECK(summary.nodes_stopped == 2);
  CHECK(summary.node_s_on == Approx(50 + 90 + 50));  // node 0 0-50 s; node 1 10-100 s; node 2 10-60 s
}

TEST_CASE("the autoscaler's decisions go in the run's decision log, with their reasons", "[run][autoscale]") {
  Fixture f;
  f.run_until(60);  // 3 nodes wanted from 10 s, 1 from 50 s
  std::vector<std::pair<std::string, std::uint32_t>> log;
  for (const Decision& d : f.trace.decisions) {
    REQUIRE(d.node);
    log.emplace_back(decision_kind_name(d.kind), index(*d.node));
  }
  const std::vector<std::pair<std::string, std::uint32_t>> expected{
      {"node-started", 1}, {"node-started", 2}, {"node-draining", 2}, {"node-off", 2}, {"node-draining", 1}, {"node-off", 1}};
  CHECK(log == expected);
  CHECK(f.trace.reasons[f.trace.decisions[0].reason] == "the autoscaler wants 3 nodes on; 1 is on or provisioning");
  CHECK_THAT(f.trace.reasons[f.trace.decisions[3].reason], Catch::StartsWith("drained"));
}

TEST_CASE("a node holding a serving replica stays on, counted apart from the nodes the autoscaler sizes", "[run][autoscale]") {
  Fixture f({2});  // node 2's GPU serves
  CHECK(f.autoscaler.starts_on(2));
  CHECK_FALSE(f.occupancy.off(0));
  CHECK(f.occupancy.off(1));
  f.run_until(60);  // 3 nodes wanted from 10 s (node 1 started), 1 from 50 s: the two others drain, node 2 stays
  CHECK(f.nodes_off == std::vector<std::uint32_t>{1, 0});
  for (const Decision& d : f.trace.decisions) CHECK(index(*d.node) != 2);
  Summary summary;
  f.autoscaler.summarize(100, summary);
  CHECK(summary.node_s_on == Approx(100 + 50 + 40));  // node 2 throughout; node 0 0-50 s; node 1 10-50 s
}

TEST_CASE("nodes started for a serving replica wanted come from its deployment's nodes first", "[run][autoscale]") {
  Fixture f;
  f.serving_wants = {{.first_node = 2, .end_node = 3, .nodes = 1, .holding = {}}};  // a replica that only node 2's type can hold
  f.run_until(10);  // 3 nodes wanted: node 2 first, for the replica, then node 1
  std::vector<std::uint32_t> started;
  for (const Decision& d : f.trace.decisions) {
    if (std::string(decision_kind_name(d.kind)) == "node-started") started.push_back(index(*d.node));
  }
  CHECK(started == std::vector<std::uint32_t>{2, 1});
}

TEST_CASE("a draining node kept for a serving replica is not drained again in the same decision", "[run][autoscale]") {
  Fixture f;
  f.run_until(45);  // nodes 1 and 2 on since 15 s
  f.memory.hold(make_id<GpuId>(2), 1e9, 45);  // an output waits on node 2's GPU: a drain cannot finish
  f.run_until(50);  // one node wanted: node 1 goes off, node 2 stays draining
  REQUIRE(f.nodes_off == std::vector<std::uint32_t>{1});
  f.serving_wants = {{.first_node = 2, .end_node = 3, .nodes = 1, .holding = {}}};  // a replica that only node 2's type can hold
  f.run_until(60);  // node 2 kept for it, and node 0, idle, drains in its place (one node wanted)
  CHECK(f.nodes_off == std::vector<std::uint32_t>{1, 0});
  const auto log_at = [&](double t) {
    std::vector<std::pair<std::string, std::uint32_t>> log;
    for (const Decision& d : f.trace.decisions) {
      if (d.time_s == t) log.emplace_back(decision_kind_name(d.kind), index(*d.node));
    }
    return log;
  };
  using Log = std::vector<std::pair<std::string, std::uint32_t>>;
  CHECK(log_at(50) == Log{{"node-draining", 2}, {"node-draining", 1}, {"node-off", 1}});
  CHECK(log_at(60) == Log{{"node-kept", 2}, {"node-draining", 0}, {"node-off", 0}});
  CHECK(f.trace.reasons[f.trace.decisions[f.trace.decisions.size() - 3].reason] == "a serving replica wanted needs a node of nodes 2 to 2");
}
