// End-to-end simulations whose results can be worked out by hand on the round-number test catalog:
// unit-gpu runs bf16 at 100 TFLOP/s with 1 TB/s of memory bandwidth and no launch overhead.
// GPUs of one node talk through the NVSwitch: two NVLink hops of 100 GB/s and 1 us each. Across
// nodes the route is GPU>PCIe switch>NIC>switch>NIC>PCIe switch>GPU: four PCIe hops (50 GB/s, 2 us)
// and two NIC hops (25 GB/s, 3 us), so 25 GB/s and 14 us.
#include <catch2/catch.hpp>
#include <algorithm>
#include <sstream>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/topology.hpp"
#include "helpers.hpp"

using fleetsim::TaskStatus;
using fleetsim::test::unit_scenario;

namespace {

std::string one_arrival(const std::string& tasks, const std::string& edges, const std::string& nodes) {
  return R"("cluster": {"nodes": )" + nodes + R"(}, "workflows": {"w": {"tasks": )" + tasks + R"(, "edges": )" + edges +
         R"(}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}])";
}

const fleetsim::TaskRecord& record(const fleetsim::RunResult& run, const std::string& name, const fleetsim::Scenario& sc) {
  for (const fleetsim::TaskRecord& t : run.trace.tasks) {
    if (sc.workflows[t.workflow].tasks[t.task].name == name) return t;
  }
  FAIL("no task " << name);
  throw;
}

}  // namespace

TEST_CASE("a chain on one GPU takes the sum of its task times", "[simulation]") {
  // 100 TFLOP at 100 TFLOP/s = 1 s; 200 TFLOP = 2 s; 2 TB of traffic at 1 TB/s = 2 s (memory-bound,
  // since 10 TFLOP take 0.1 s); 25 TFLOP in fp32 at 50 TFLOP/s = 0.5 s.
  const auto sc = unit_scenario(one_arrival(
      R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "200 TFLOP"}},
          {"name": "c", "work": {"flop": "10 TFLOP", "bytes": "2 TB"}}, {"name": "d", "work": {"flop": "25 TFLOP", "dtype": "fp32"}}])",
      R"([{"from": "a", "to": "b", "bytes": "1 GB"}, {"from": "b", "to": "c"}, {"from": "c", "to": "d"}])",
      R"([{"type": "unit-node-1", "count": 1}])"));
  const auto run = fleetsim::simulate(sc);
  CHECK(run.summary.makespan_s == Approx(5.5).epsilon(1e-12));
  CHECK(run.summary.tasks.completed == 4);
  CHECK(run.summary.gpu_utilization == Approx(1.0));
  CHECK(run.summary.bytes_transferred == 0);  // everything stayed on one GPU
  CHECK(run.summary.latency_s.p50 == Approx(5.5));
  CHECK(record(run, "c", sc).start_s == Approx(3.0));
  // 5.5 s at the unit GPU's 500 W TDP; alone, so no wait, slowdown 1, one workflow in 5.5 s.
  CHECK(run.summary.energy_j == Approx(2750));
  CHECK(run.summary.tenants[0].mean_wait_s == 0);
  CHECK(run.summary.tenants[0].mean_slowdown == Approx(1.0));
  CHECK(run.summary.tenants[0].throughput_per_s == Approx(1 / 5.5));
  CHECK(run.summary.fairness == 1);
}

TEST_CASE("a node priced whole (a cloud instance) costs its price per hour, not its GPUs'", "[simulation][cost]") {
  // The chain above (5.5 s) on a two-GPU node at its GPU type's price, then priced whole at $36/hour.
  const std::string tasks = R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "450 TFLOP"}}])";
  const std::string edges = R"([{"from": "a", "to": "b"}])";
  const auto by_gpu = fleetsim::simulate(unit_scenario(one_arrival(tasks, edges, R"([{"type": "unit-node-2", "count": 1}])")));
  const auto whole = fleetsim::simulate(unit_scenario(
      one_arrival(tasks, edges, R"([{"type": "unit-node-2", "count": 1, "node_overrides": {"price_usd_per_hour": 36}}])")));
  REQUIRE(whole.summary.makespan_s == Approx(5.5));
  CHECK(whole.summary.cost_usd == Approx(36 * 5.5 / 3600));
  CHECK(by_gpu.summary.cost_usd != Approx(whole.summary.cost_usd));
}

TEST_CASE("a warm-up leaves early arrivals out of latencies and SLOs, not out of the run", "[simulation][slo]") {
  // A 3 s workflow at 0 s and a 1 s one at 10 s on one unit GPU; a p95 target of 2 s.
  const auto scenario = [](const std::string& warmup) {
    return unit_scenario(warmup + R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
        "workflows": {"slow": {"tasks": [{"name": "a", "work": {"flop": "300 TFLOP"}}]},
                      "fast": {"tasks": [{"name": "b", "work": {"flop": "100 TFLOP"}}]}},
        "workload": [{"workflow": "slow", "arrival": {"process": "once"}},
                     {"workflow": "fast", "arrival": {"process": "once", "start": "10 s"}}],
        "slos": [{"metric": "latency_p95", "target": "2 s"}])");
  };
  const auto all = fleetsim::simulate(scenario(""));
  const auto warm = fleetsim::simulate(scenario(R"("warmup": "5 s", )"));
  CHECK(all.summary.latency_s.mean == Approx(2.0));
  CHECK_FALSE(all.summary.slos[0].met);
  CHECK(warm.summary.latency_s.mean == Approx(1.0));
  CHECK(warm.summary.latency_s.p95 == Approx(1.0));
  CHECK(warm.summary.slos[0].met);
  CHECK(warm.summary.workflows.completed == 2);  // both still ran
  CHECK(warm.summary.makespan_s == all.summary.makespan_s);
  CHECK_THAT(fleetsim::test::scenario_error(R"({"name": "w", "horizon": "1 s", "warmup": "1 s", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
                                              "workload": [{"workflow": "x", "arrival": {"process": "once"}}]})"),
             Catch::Contains("bad.json: /warmup: expected less than the horizon (1 s)"));
}

TEST_CASE("a fork on two GPUs takes the longer branch plus its transfer", "[simulation]") {
  // a (1 s) on g0; then b (1 s) on g0 and c (2 s) on g1, which first receives 10 GB over NVLink:
  // 2 us + 10 GB / 100 GB/s = 0.100002 s. Then d on g0 receives c's 5 GB from g1: 0.050002 s, runs 1 s.
  const auto sc = unit_scenario(one_arrival(
      R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "100 TFLOP"}},
          {"name": "c", "work": {"flop": "200 TFLOP"}}, {"name": "d", "work": {"flop": "100 TFLOP"}}])",
      R"([{"from": "a", "to": "b", "bytes": "10 GB"}, {"from": "a", "to": "c", "bytes": "10 GB"},
          {"from": "b", "to": "d", "bytes": "1 GB"}, {"from": "c", "to": "d", "bytes": "5 GB"}])",
      R"([{"type": "unit-node-2", "count": 1}])"));
  const auto run = fleetsim::simulate(sc);
  const auto& c = record(run, "c", sc);
  CHECK(run.trace.gpus[c.gpu_begin] != run.trace.gpus[record(run, "b", sc).gpu_begin]);
  CHECK(c.compute_start_s - c.start_s == Approx(0.100002).epsilon(1e-12));
  const double branch = 1.0 + 0.100002 + 2.0;
  CHECK(record(run, "d", sc).start_s == Approx(branch).epsilon(1e-12));
  CHECK(run.summary.makespan_s == Approx(branch + 0.050002 + 1.0).epsilon(1e-12));
  CHECK(run.summary.bytes_transferred == Approx(15e9));
}

TEST_CASE("max_min_tolerance is off unless given, stated where given, and bounded", "[simulation][network][scenario]") {
  // The fork above shares no link, so the option changes no time here; what it changes is held against the exact
  // sharing in the network tests and reports/performance.md.
  const std::string body = one_arrival(
      R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "100 TFLOP"}},
          {"name": "c", "work": {"flop": "200 TFLOP"}}, {"name": "d", "work": {"flop": "100 TFLOP"}}])",
      R"([{"from": "a", "to": "b", "bytes": "10 GB"}, {"from": "a", "to": "c", "bytes": "10 GB"},
          {"from": "b", "to": "d", "bytes": "1 GB"}, {"from": "c", "to": "d", "bytes": "5 GB"}])",
      R"([{"type": "unit-node-2", "count": 1}])");
  const auto exact_sc = unit_scenario(body);
  const auto within_sc = unit_scenario(body + R"(, "max_min_tolerance": 1e-4)");
  CHECK_FALSE(exact_sc.max_min_tolerance.has_value());
  REQUIRE(within_sc.max_min_tolerance == 1e-4);
  const auto exact = fleetsim::simulate(exact_sc);
  const auto within = fleetsim::simulate(within_sc);
  CHECK(within.summary.makespan_s == exact.summary.makespan_s);
  std::ostringstream exact_text, within_text;
  fleetsim::write_summary_text(exact_text, exact_sc, exact.summary);
  fleetsim::write_summary_text(within_text, within_sc, within.summary);
  CHECK(exact_text.str().find("max_min_tolerance") == std::string::npos);
  CHECK(within_text.str().find("\n           links shared max-min within a relative 0.0001 (max_min_tolerance") != std::string::npos);
  CHECK(fleetsim::summary_json(exact.summary).find("max_min_tolerance") == std::string::npos);
  CHECK(fleetsim::summary_json(within.summary).find(R"("max_min_tolerance": 0.0001)") != std::string::npos);
  for (const char* bad : {"0", "0.5", R"("small")"}) {
    CHECK_THAT(fleetsim::test::scenario_error(R"({"name": "w", "max_min_tolerance": )" + std::string(bad) + R"(, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
                                                "workflows": {"x": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
                                                "workload": [{"workflow": "x", "arrival": {"process": "once"}}]})"),
               Catch::Contains("bad.json: /max_min_tolerance: expected a number from"));
  }
}

TEST_CASE("a transfer across nodes pays every hop", "[simulation]") {
  // Two 1-GPU nodes; the fork puts c on the other node: 14 us + 10 GB / 25 GB/s = 0.400014 s.
  const auto sc = unit_scenario(one_arrival(
      R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "100 TFLOP"}},
          {"name": "c", "work": {"flop": "100 TFLOP"}}])",
      R"([{"from": "a", "to": "b"}, {"from": "a", "to": "c", "bytes": "10 GB"}])",
      R"([{"type": "unit-node-1", "count": 2}])"));
  const auto run = fleetsim::simulate(sc);
  const auto& c = record(run, "c", sc);
  CHECK(c.compute_start_s - c.start_s == Approx(0.400014).epsilon(1e-12));
  CHECK(run.summary.makespan_s == Approx(2.400014).epsilon(1e-12));
  CHECK(run.summary.nic_bytes == Approx(2 * 10e9));  // out of one NIC, into the other
}

TEST_CASE("a gang splits its work and prefers one node", "[simulation]") {
  // 400 TFLOP over 2 GPUs = 2 s. Node 0 has one GPU, node 1 has two: the gang goes to node 1.
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}, {"type": "unit-node-2", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "400 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const auto run = fleetsim::simulate(sc);
  CHECK(run.summary.makespan_s == Approx(2.0));
  const auto& g = run.trace.tasks[0];
  REQUIRE(g.gpu_count == 2);
  CHECK(run.cluster.gpu_name(run.trace.gpus[g.gpu_begin]) == "n1.g0");
  CHECK(run.cluster.gpu_name(run.trace.gpus[g.gpu_begin + 1]) == "n1.g1");
}

TEST_CASE("FIFO blocks behind a gang that does not fit yet", "[simulation][policy]") {
  // One 2-GPU node. t=0: a 1-GPU task of 3 s. t=1: a 2-GPU gang (1 s) arrives, then at t=1 a
  // 1-GPU task. The single task must wait behind the gang although one GPU is free.
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"long": {"tasks": [{"name": "l", "work": {"flop": "300 TFLOP"}}]},
                    "gang": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "200 TFLOP"}}]},
                    "short": {"tasks": [{"name": "s", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "long", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"workflow": "gang", "arrival": {"process": "times", "times": ["1 s"]}},
                   {"workflow": "short", "arrival": {"process": "times", "times": ["1 s"]}}])");
  const auto run = fleetsim::simulate(sc);
  CHECK(record(run, "g", sc).start_s == Approx(3.0));
  CHECK(record(run, "s", sc).start_s == Approx(4.0));
  CHECK(run.summary.makespan_s == Approx(5.0));
}

TEST_CASE("at the horizon every task is counted once", "[simulation]") {
  // Ten 1-s tasks on one GPU arriving at once; the horizon at 3.5 s leaves 3 done, 1 running, 6 queued.
  const auto sc = unit_scenario(R"("horizon": "3.5 s", "cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 10}}])");
  const auto run = fleetsim::simulate(sc);
  const auto& t = run.summary.tasks;
  CHECK(run.summary.horizon_reached);
  CHECK(t.submitted == 10);
  CHECK(t.completed == 3);
  CHECK(t.running == 1);
  CHECK(t.queued == 6);
  CHECK(t.completed + t.failed + t.running + t.queued == t.submitted);
  CHECK(run.summary.gpu_utilization == Approx(1.0));
  CHECK(run.summary.end_s == 3.5);
  // Tasks 2..4 waited 1, 2, 3 s before their start; the other six were never placed.
  CHECK(run.summary.tenants[0].mean_wait_s == Approx((0 + 1 + 2 + 3) / 4.0));
}

TEST_CASE("M/D/1: mean wait matches the Pollaczek-Khinchine formula", "[simulation][validation]") {
  // Poisson arrivals (rate 0.5 /s) of single 1-s tasks on one GPU: rho = 0.5, and the mean wait in
  // queue is Wq = rho * D / (2 (1 - rho)) = 0.5 s, so the mean latency is D + Wq = 1.5 s.
  const auto sc = unit_scenario(R"("seed": 3, "cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "0.5 /s", "count": 200000}}])");
  const auto run = fleetsim::simulate(sc);
  CHECK(run.summary.latency_s.mean == Approx(1.5).epsilon(0.02));
  CHECK(run.summary.gpu_utilization == Approx(0.5).epsilon(0.02));
}

TEST_CASE("one seed gives identical output, another seed a different one", "[simulation][determinism]") {
  const fleetsim::Scenario sc = fleetsim::load_scenario(fleetsim::test::source_dir() + "/scenarios/default.json");
  auto outputs = [&](std::uint64_t seed) {
    const auto run = fleetsim::simulate(sc, {.seed = seed});
    std::ostringstream trace;
    fleetsim::write_trace_csv(trace, sc, run);
    return fleetsim::summary_json(run.summary) + trace.str();
  };
  const std::string first = outputs(42);
  CHECK(first == outputs(42));
  CHECK(first != outputs(43));
}

namespace {

// The summary and the events of a run that keeps every record, and of one that drops ended instances' as it
// goes; and how many task records the second dropped.
struct BothWays {
  std::string kept, dropped;
  std::uint64_t kept_events = 0, dropped_events = 0;
  std::uint32_t tasks_dropped = 0;
  std::size_t tasks_held = 0;
};
// Both ways gave the same summary and the same events.
void check_alike(const BothWays& run) {
  CHECK(run.dropped == run.kept);
  CHECK(run.dropped_events == run.kept_events);
}

BothWays both_ways(const fleetsim::Scenario& sc) {
  const auto kept = fleetsim::simulate(sc);
  const auto dropped = fleetsim::simulate(sc, {.keep_records = false});
  return {fleetsim::summary_json(kept.summary), fleetsim::summary_json(dropped.summary), kept.event_digest, dropped.event_digest,
          dropped.trace.tasks_dropped, dropped.trace.tasks.size()};
}

}  // namespace

TEST_CASE("a run that drops ended instances' records has the summary of one that keeps them", "[simulation][records]") {
  // Two tenants (one interactive), chains whose tensor crosses nodes, weights loaded, gangs with an
  // all-reduce, a warm-up, latency and attainment SLOs: every sum of the summary, folded in parts.
  const fleetsim::Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 3}]},
      "tenants": [{"name": "batch"}, {"name": "chat", "class": "interactive"}],
      "workflows": {"chain": {"tasks": [{"name": "a", "model": {"id": "m", "weights": "2 GB"}, "work": {"flop": "20 TFLOP", "size": "exponential"}},
                                        {"name": "b", "work": {"flop": "10 TFLOP"}}],
                              "edges": [{"from": "a", "to": "b", "bytes": "1 GB"}]},
                    "gang": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "50 TFLOP"}, "collective": {"op": "all-reduce", "bytes": "1 GB"}}]}},
      "workload": [{"workflow": "chain", "tenant": "chat", "arrival": {"process": "poisson", "rate": "8/s", "count": 6000}},
                   {"workflow": "gang", "tenant": "batch", "arrival": {"process": "poisson", "rate": "1/s", "count": 600}}],
      "warmup": "5 s",
      "slos": [{"tenant": "chat", "metric": "latency_p95", "target": "2 s"}, {"class": "interactive", "metric": "attainment", "within": "1 s", "target": 0.9},
               {"metric": "throughput", "target": "5/s"}])");
  const BothWays run = both_ways(sc);
  check_alike(run);
  CHECK(run.tasks_dropped > 10000);  // of 12,600
  CHECK(run.tasks_held < 2000);
}

TEST_CASE("every shipped scenario has the same summary whether it keeps its records or not", "[simulation][records]") {
  const std::vector<std::string> scenarios = fleetsim::test::shipped_scenarios();
  REQUIRE(scenarios.size() >= 10);
  int dropping = 0;
  for (const std::string& file : scenarios) {
    INFO(file);
    const BothWays run = both_ways(fleetsim::load_scenario(file));
    check_alike(run);
    if (run.tasks_dropped > 0) ++dropping;
  }
  CHECK(dropping >= 1);
}

TEST_CASE("a dropped task's compute end still due after its collective failed it changes nothing", "[simulation][records][collectives]") {
  // NVLS cannot run on a PCIe box: each task fails when its overlapped all-reduce starts, half-way through its
  // compute, and the instance ends; its compute's end is still queued and comes after the record is dropped.
  const auto sc = fleetsim::test::builtin_scenario(R"("cluster": {"nodes": [{"type": "l40s-pcie-2", "count": 4}]},
      "workflows": {"w": {"tasks": [{"name": "step", "gpus": 2, "work": {"flop": "50 TFLOP"},
          "collective": {"op": "all-reduce", "bytes": "1 GB", "algo": "nvls", "overlap": 0.5}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "20/s", "count": 4000}}])");
  const BothWays run = both_ways(sc);
  check_alike(run);
  CHECK(run.tasks_dropped > 2000);
}

TEST_CASE("closed loops and one GPU an instance fold to the same summary as they keep", "[simulation][records]") {
  const fleetsim::Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 2}]},
      "instance_placement": "one-gpu",
      "tenants": [{"name": "a"}, {"name": "b"}],
      "workflows": {"chain": {"tasks": [{"name": "x", "work": {"flop": "20 TFLOP", "size": "exponential"}}, {"name": "y", "work": {"flop": "10 TFLOP"}}],
                              "edges": [{"from": "x", "to": "y", "bytes": "1 GB"}]}},
      "workload": [{"workflow": "chain", "tenant": "a", "arrival": {"process": "closed", "users": 3, "think": "0.5 s", "count": 1000}},
                   {"workflow": "chain", "tenant": "b", "arrival": {"process": "poisson", "rate": "2/s", "count": 2000}}])");
  const BothWays run = both_ways(sc);
  check_alike(run);
  CHECK(run.tasks_dropped > 5000);
}

TEST_CASE("a run that would keep more than 20 million task records is refused before it starts", "[simulation][records][input]") {
  const fleetsim::Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "periodic", "interval": "1 ms", "count": 20000001}}])");
  try {
    fleetsim::simulate(sc);  // keeps every record, as runs writing files do
    FAIL("a run keeping 20,000,001 records started");
  } catch (const fleetsim::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/workload: would make up to 20000001 tasks, over the 20000000 whose records a run keeps"));
  }
}

TEST_CASE("runs whose summary reads records together keep them all", "[simulation][records]") {
  // Batches share a GPU's time among their members, read together at the end.
  const fleetsim::Scenario batched = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "model": {"id": "m", "weights": "1 GB"}, "work": {"flop": "1 TFLOP"},
                                     "batching": {"max_size": 4, "max_wait": "0.1 s"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "20/s", "count": 5000}}])");
  const BothWays run = both_ways(batched);
  CHECK(run.tasks_dropped == 0);
  CHECK(run.tasks_held == 5000);
  CHECK(run.dropped == run.kept);
}

TEST_CASE("the default scenario completes every task", "[simulation]") {
  const fleetsim::Scenario sc = fleetsim::load_scenario(fleetsim::test::source_dir() + "/scenarios/default.json");
  const auto run = fleetsim::simulate(sc);
  CHECK(run.summary.tasks.submitted > 0);
  CHECK(run.summary.tasks.completed == run.summary.tasks.submitted);
  CHECK(run.summary.workflows.completed == run.summary.workflows.submitted);
  CHECK_FALSE(run.summary.horizon_reached);
}

TEST_CASE("percentiles interpolate between closest ranks", "[summary]") {
  CHECK(fleetsim::percentile({1, 2, 3, 4}, 50) == 2.5);
  CHECK(fleetsim::percentile({5}, 99) == 5);
  CHECK(fleetsim::percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 95) == Approx(10.5));
  CHECK(fleetsim::percentile({}, 50) == 0);
}

TEST_CASE("a gang's compute is followed by its collective, or overlaps it", "[simulation][network]") {
  // One 8-GPU H100 node. 7915.2 TFLOP over 8 GPUs at 989.4 TFLOP/s = 1 s of compute, plus one 4 us
  // kernel launch; then a ring all-reduce of 9 GB, as the collective model times it alone.
  auto run_with = [](const std::string& collective) {
    const auto sc = fleetsim::test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "step", "gpus": 8, "work": {"flop": "7915.2 TFLOP"},
                                       "collective": )" + collective + R"(}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
    return fleetsim::simulate(sc).trace.tasks[0];
  };
  const fleetsim::ClusterSpec spec = fleetsim::cluster_of("hgx-h100-8", 1);
  const fleetsim::Cluster cluster(spec);
  const fleetsim::Topology topology(cluster, spec.fabric);
  std::vector<fleetsim::GpuId> gang;
  for (std::uint32_t i = 0; i < 8; ++i) gang.push_back(fleetsim::make_id<fleetsim::GpuId>(i));
  auto alone = [&](double bytes) {
    return fleetsim::analytical_time_s(topology, fleetsim::plan_collective(cluster, topology, fleetsim::CollectiveOp::all_reduce,
                                                                           fleetsim::CollectiveAlgo::ring, gang, bytes));
  };
  const double compute = 1.0 + 4e-6;
  const double comm = alone(9e9);
  const auto serial = run_with(R"({"op": "all-reduce", "bytes": "9 GB", "algo": "ring"})");
  CHECK(serial.comm_start_s == Approx(compute));
  CHECK(serial.end_s == Approx(compute + comm).epsilon(1e-9));
  // Half the bytes on the wire.
  const auto compressed = run_with(R"({"op": "all-reduce", "bytes": "9 GB", "algo": "ring", "compression": 0.5})");
  CHECK(compressed.end_s == Approx(compute + alone(4.5e9)).epsilon(1e-9));
  // Fully overlapped: the collective runs alongside the compute and hides behind it.
  const auto overlapped = run_with(R"({"op": "all-reduce", "bytes": "9 GB", "algo": "ring", "overlap": 1})");
  CHECK(overlapped.comm_start_s == Approx(0.0));
  CHECK(overlapped.end_s == Approx(compute));
  // Overlapping the last 1% of compute leaves the rest of the communication exposed.
  const auto partial = run_with(R"({"op": "all-reduce", "bytes": "9 GB", "algo": "ring", "overlap": 0.01})");
  CHECK(partial.end_s == Approx(0.99 * compute + comm).epsilon(1e-9));
}

TEST_CASE("a task's collectives each start at their own overlap and share the gang's links", "[simulation][network][collectives]") {
  // One unit node of 2 GPUs (100 GB/s NVLink each way): 100 TFLOP over the gang is 0.5 s of compute. Each
  // collective sends GPU 0 -> 1 and 1 -> 0, one flow a direction, so its flows meet the others' alone on
  // each link. A (40 GB) runs beside the whole compute, B (20 GB) beside its second half, C (10 GB) after it:
  //   0 - 0.25 s     A alone, 100 GB/s: 25 GB (A 15 GB left)
  //   0.25 - 0.5 s   A and B, 50 GB/s each: 12.5 GB each (A 2.5, B 7.5 left)
  //   0.5 - 0.575 s  A, B and C, a third each: A done (B 5, C 7.5 left)
  //   0.575 - 0.675  B and C, half each: B done (C 2.5 left)
  //   0.675 - 0.7 s  C alone: the task ends at 0.7 s (and microseconds of latency).
  auto run_with = [](const std::string& collectives) {
    const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "step", "gpus": 2, "work": {"flop": "100 TFLOP"}, "collective": )" +
                                  collectives + R"(}]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
    return fleetsim::simulate(sc).trace.tasks[0];
  };
  const std::string a = R"({"op": "send-recv", "bytes": "40 GB", "overlap": 1})", b = R"({"op": "send-recv", "bytes": "20 GB", "overlap": 0.5})",
                    c = R"({"op": "send-recv", "bytes": "10 GB"})";
  const fleetsim::TaskRecord three = run_with("[" + c + ", " + a + ", " + b + "]");  // in any order
  CHECK(three.compute_start_s == 0);
  CHECK(three.comm_start_s == 0);  // the first to begin
  CHECK(three.end_s == Approx(0.7).epsilon(1e-4));
  // Alone, A hides behind the compute; beside B, it outlasts it.
  CHECK(run_with(a).end_s == Approx(0.5).epsilon(1e-4));
  const fleetsim::TaskRecord two = run_with("[" + a + ", " + b + "]");  // A 15 GB left at 0.25 s, then half each: A done at 0.55, B at 0.6
  CHECK(two.end_s == Approx(0.6).epsilon(1e-4));
  CHECK(run_with("[" + b + "]").comm_start_s == Approx(0.25).epsilon(1e-4));
}

TEST_CASE("a collective that cannot run fails its task and stops the task's other collectives", "[simulation][network][collectives]") {
  // Two L40S of a PCIe box: a short compute, beside it a 40 GB send each way (over a second alone); at the
  // compute's end the all-reduce is due, and NVLS cannot run without NVSwitch: the task fails then, and its
  // sends stop with it instead of running on from GPUs it no longer holds.
  const auto sc = fleetsim::test::builtin_scenario(R"("cluster": {"nodes": [{"type": "l40s-pcie-2", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "step", "gpus": 2, "work": {"flop": "50 TFLOP"},
          "collective": [{"op": "send-recv", "bytes": "40 GB", "overlap": 1}, {"op": "all-reduce", "bytes": "1 GB", "algo": "nvls"}]}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const auto run = fleetsim::simulate(sc);
  const fleetsim::TaskRecord& r = run.trace.tasks[0];
  CHECK(r.status == TaskStatus::failed);
  CHECK(run.trace.reasons[r.reason].find("nvls cannot run all-reduce") != std::string::npos);
  CHECK(r.comm_start_s == r.compute_start_s);  // the sends began with the compute
  CHECK(r.end_s < 0.5);
  // The whole sends would carry 80 GB over at least two links each; they stopped at the failure.
  const auto& n = run.summary;
  CHECK(n.gpu_link_bytes + n.host_link_bytes + n.nic_bytes + n.fabric_bytes < 40e9);
}

TEST_CASE("a task's collectives are one object or a list of one to eight", "[simulation][input][collectives]") {
  auto error = [](const std::string& collective) {
    return fleetsim::test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "t", "gpus": 2, "collective": )" + collective + R"(}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  const std::string one = R"({"op": "all-reduce", "bytes": "1 GB"})";
  CHECK(error(one).empty());
  CHECK(error("[" + one + ", " + one + "]").empty());
  CHECK(error("[]").find("/workflows/w/tasks/0/collective: expected one collective or a list of 1 to 8, found a list of 0") != std::string::npos);
  std::string nine = one;
  for (int i = 1; i < 9; ++i) nine += ", " + one;
  CHECK(error("[" + nine + "]").find("found a list of 9") != std::string::npos);
  CHECK(error("[" + one + R"(, {"op": "all-reduce"}])").find("/workflows/w/tasks/0/collective/1/bytes") != std::string::npos);
}

TEST_CASE("two jobs' collectives sharing a NIC slow each other as max-min predicts", "[simulation][network]") {
  // Three unit nodes of 2 GPUs and 1 NIC (25 GB/s). Job A's 3-GPU gang takes n0.g0, n0.g1, n1.g0; job B's
  // takes n1.g1, n2.g0, n2.g1. Each ring sends 2 x 2/3 x S into and out of node 1 through its one NIC.
  // Alone, A's ring runs at 25 GB/s; with B beside it, each direction of that NIC is shared by two
  // flows, so A's bandwidth term doubles. Latency: 4 ring steps x 14 us (the cross-node hop).
  const std::string job = R"({"tasks": [{"name": "ar", "gpus": 3, "collective": {"op": "all-reduce", "bytes": "3 GB", "algo": "ring"}}]})";
  auto end_of_a = [&](bool with_b) {
    const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 3}]},
        "workflows": {"a": )" + job + R"(, "b": )" + job + R"(},
        "workload": [{"workflow": "a", "arrival": {"process": "once"}})" +
                                  (with_b ? R"(, {"workflow": "b", "arrival": {"process": "once"}}])" : "]"));
    const auto run = fleetsim::simulate(sc);
    CHECK(run.summary.tasks.completed == (with_b ? 2u : 1u));
    return run.trace.tasks[0].end_s;
  };
  const double bandwidth_term = 2.0 * 2 / 3 * 3e9 / 25e9;
  CHECK(end_of_a(false) == Approx(bandwidth_term + 4 * 14e-6).epsilon(1e-6));
  CHECK(end_of_a(true) == Approx(2 * bandwidth_term + 4 * 14e-6).epsilon(1e-6));
}

TEST_CASE("a leaf whose uplinks ECMP loaded unevenly is flagged with its links' own bytes", "[simulation][network]") {
  // The mixed scenario's fat-tree: its flows hash onto few of each leaf's 12 uplinks.
  const fleetsim::Scenario sc = fleetsim::load_scenario(fleetsim::test::source_dir() + "/scenarios/mixed.json");
  const fleetsim::RunResult run = fleetsim::simulate(sc);
  REQUIRE_FALSE(run.summary.uneven_uplinks.empty());
  for (const fleetsim::UnevenUplinks& u : run.summary.uneven_uplinks) {
    // Recount the leaf's uplinks from the topology and the run's bytes per link.
    std::vector<double> bytes;
    for (std::size_t l = 0; l < run.topology.links().size(); ++l) {
      const fleetsim::TopoLink& link = run.topology.links()[l];
      if (link.cls == fleetsim::LinkClass::fabric && run.topology.vertex_name(link.from) == u.leaf) bytes.push_back(run.link_bytes[l]);
    }
    REQUIRE(static_cast<int>(bytes.size()) == u.uplinks);
    CHECK(*std::max_element(bytes.begin(), bytes.end()) == u.max_bytes);
    CHECK(*std::min_element(bytes.begin(), bytes.end()) == u.min_bytes);
    CHECK(u.max_bytes > 1.5 * u.mean_bytes);
  }
}

TEST_CASE("one GPU an instance: its tasks run there one at a time, and no other instance's task lands there until it ends", "[simulation][one-gpu]") {
  // The fork above (a 1 s; b 1 s and c 2 s after it; d 1 s after both), two instances at once on two GPUs.
  // Spread, an instance's b and c run side by side on two GPUs; one GPU an instance, each instance runs
  // a, b, c, d in turn on its own GPU: 5 s, nothing moved between GPUs.
  const std::string tasks = R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "100 TFLOP"}},
          {"name": "c", "work": {"flop": "200 TFLOP"}}, {"name": "d", "work": {"flop": "100 TFLOP"}}])";
  const std::string edges = R"([{"from": "a", "to": "b", "bytes": "10 GB"}, {"from": "a", "to": "c", "bytes": "10 GB"},
          {"from": "b", "to": "d", "bytes": "1 GB"}, {"from": "c", "to": "d", "bytes": "5 GB"}])";
  const auto with = [&](const std::string& nodes, int count, const std::string& placement) {
    std::string body = one_arrival(tasks, edges, nodes);
    body.replace(body.find(R"("once"})"), 7, R"("once", "count": )" + std::to_string(count) + "}");
    return unit_scenario(body + R"(, "instance_placement": ")" + placement + "\"");
  };
  const auto sc = with(R"([{"type": "unit-node-2", "count": 1}])", 2, "one-gpu");
  const auto run = fleetsim::simulate(sc);
  REQUIRE(run.summary.workflows.completed == 2);
  CHECK(run.summary.makespan_s == Approx(5.0).epsilon(1e-12));
  CHECK(run.summary.bytes_transferred == 0);
  for (const fleetsim::TaskRecord& t : run.trace.tasks) {
    const auto first = run.trace.tasks[index(t.instance) * 4];
    CHECK(run.trace.gpus[t.gpu_begin] == run.trace.gpus[first.gpu_begin]);
  }
  CHECK(run.trace.gpus[run.trace.tasks[0].gpu_begin] != run.trace.gpus[run.trace.tasks[4].gpu_begin]);
  CHECK(run.summary.one_gpu_instances);
  std::ostringstream text;
  fleetsim::write_summary_text(text, sc, run.summary);
  CHECK(text.str().find("placement  one GPU an instance") != std::string::npos);
  CHECK(fleetsim::summary_json(run.summary).find(R"("instance_placement": "one-gpu")") != std::string::npos);
  // One GPU, two instances: the second starts when the first has ended (5 s), where spread interleaves them.
  const auto one = fleetsim::simulate(with(R"([{"type": "unit-node-1", "count": 1}])", 2, "one-gpu"));
  const auto spread = fleetsim::simulate(with(R"([{"type": "unit-node-1", "count": 1}])", 2, "spread"));
  const auto start_of = [](const fleetsim::RunResult& r, int instance) {
    double first = 1e300;
    for (const fleetsim::TaskRecord& t : r.trace.tasks) {
      if (index(t.instance) == static_cast<std::uint32_t>(instance)) first = std::min(first, t.start_s);
    }
    return first;
  };
  const int later = start_of(one, 0) < start_of(one, 1) ? 1 : 0;
  CHECK(start_of(one, later) == Approx(5.0).epsilon(1e-12));
  CHECK(one.summary.makespan_s == Approx(10.0).epsilon(1e-12));
  CHECK(std::max(start_of(spread, 0), start_of(spread, 1)) < 5.0);
  CHECK_FALSE(spread.summary.one_gpu_instances);
}

TEST_CASE("one GPU an instance: a task stopped by its GPU's failure runs again there once it is repaired", "[simulation][one-gpu][faults]") {
  // a (1 s) then b (2 s), one instance on a node of two GPUs; its GPU fails at 2 s (b half done) for 3 s:
  // b runs again on the same GPU from 5 s, though the other GPU was free all along: done at 7 s.
  const auto sc = unit_scenario(one_arrival(R"([{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "200 TFLOP"}}])",
                                            R"([{"from": "a", "to": "b"}])", R"([{"type": "unit-node-2", "count": 1}])") +
                                R"(, "instance_placement": "one-gpu", "faults": {"events": [{"at": "2 s", "gpu": "n0.g0", "for": "3 s"}], "retry": {"max_attempts": 3}})");
  const auto run = fleetsim::simulate(sc);
  REQUIRE(run.summary.workflows.completed == 1);
  const auto& a = record(run, "a", sc);
  const auto& b = record(run, "b", sc);
  REQUIRE(run.trace.gpus[a.gpu_begin] == fleetsim::make_id<fleetsim::GpuId>(0));  // the first free GPU, where the fault strikes
  CHECK(run.trace.gpus[b.gpu_begin] == run.trace.gpus[a.gpu_begin]);
  CHECK(b.start_s == Approx(5.0).epsilon(1e-12));
  CHECK(run.summary.makespan_s == Approx(7.0).epsilon(1e-12));
}

TEST_CASE("one GPU an instance: a task that does not fit its instance's GPU fails, and the tasks waiting there with it", "[simulation][one-gpu]") {
  // a leaves 50 GB for b and 30 GB for c on its GPU (100 GB); b needs 40 GB more: 120 GB there, so on
  // the instance's GPU it can never run, and c, waiting behind it, fails with it. Spread, b runs on the
  // other GPU and both complete.
  const std::string body = one_arrival(R"([{"name": "a", "work": {"flop": "1 TFLOP"}}, {"name": "b", "working_set": "40 GB", "work": {"flop": "1 TFLOP"}},
                                          {"name": "c", "work": {"flop": "1 TFLOP"}}])",
                                       R"([{"from": "a", "to": "b", "bytes": "50 GB"}, {"from": "a", "to": "c", "bytes": "30 GB"}])", R"([{"type": "unit-node-2", "count": 1}])");
  const auto sc = unit_scenario(body + R"(, "instance_placement": "one-gpu")");
  const auto run = fleetsim::simulate(sc);
  CHECK(run.summary.workflows.failed == 1);
  CHECK(record(run, "b", sc).status == TaskStatus::failed);
  CHECK(run.trace.reasons[record(run, "b", sc).reason].find("does not fit the VRAM left on") != std::string::npos);
  CHECK(record(run, "c", sc).status == TaskStatus::failed);
  CHECK(run.trace.reasons[record(run, "c", sc).reason].find("task \"b\" of its instance failed") != std::string::npos);
  const auto spread = fleetsim::simulate(unit_scenario(body));
  CHECK(spread.summary.workflows.completed == 1);
}

TEST_CASE("one GPU an instance is refused beside gangs and preempting policies, and an unknown placement by name", "[simulation][one-gpu][input]") {
  const auto error_of = [](const std::string& body) {
    try {
      fleetsim::simulate(unit_scenario(body));
    } catch (const fleetsim::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string gang = one_arrival(R"([{"name": "a", "gpus": 2, "work": {"flop": "1 TFLOP"}}])", "[]", R"([{"type": "unit-node-2", "count": 1}])");
  CHECK_THAT(error_of(gang + R"(, "instance_placement": "one-gpu")"), Catch::Contains("/instance_placement") && Catch::Contains("needs a gang of GPUs"));
  CHECK(error_of(gang + R"(, "instance_placement": "spread")").empty());
  const std::string plain = one_arrival(R"([{"name": "a", "work": {"flop": "1 TFLOP"}}])", "[]", R"([{"type": "unit-node-2", "count": 1}])");
  CHECK_THAT(error_of(plain + R"(, "instance_placement": "one-gpu", "policy": {"name": "srtf"})"), Catch::Contains("/instance_placement") && Catch::Contains("preempts"));
  CHECK_THAT(error_of(plain + R"(, "instance_placement": "pinned")"), Catch::Contains("/instance_placement"));
  CHECK(error_of(plain + R"(, "instance_placement": "one-gpu")").empty());
}
