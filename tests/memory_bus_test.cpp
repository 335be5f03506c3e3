// A node's memory bus shared by its devices (sim/src/node_shares.hpp). Times worked out by hand on the
// unit GPU (100 TFLOP/s, 1 TB/s of its own memory bandwidth, no launch overhead).
#include <catch2/catch.hpp>
#include <algorithm>

#include "../sim/src/node_shares.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using Catch::Matchers::Contains;
using fleetsim::test::scenario_error;
using fleetsim::test::unit_scenario;

namespace {

// Tasks given as work fields, all arriving at t = 0, on a unit-node-2 with these node fields (what its
// devices share).
RunResult run(const std::string& shared, const std::vector<std::string>& works) {
  std::string tasks;
  for (std::size_t i = 0; i < works.size(); ++i) {
    tasks += std::string(i ? ", " : "") + R"({"name": "t)" + std::to_string(i) + R"(", "work": )" + works[i] + "}";
  }
  return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {)" + shared +
                                R"(}}]}, "workflows": {"w": {"tasks": [)" + tasks + R"(]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
}

const std::string kStream = R"({"flop": "1 TFLOP", "bytes": "1 TB"})";  // 1 s alone (memory-bound), drawing 1 TB/s
const std::string kGemm = R"({"flop": "100 TFLOP", "bytes": "200 GB"})";  // 1 s alone, drawing 0.2 TB/s

}  // namespace

TEST_CASE("two streams on a bus as wide as one device's bandwidth each get half", "[memory-bus]") {
  const RunResult r = run(R"("memory_bus": "1 TB/s")", {kStream, kStream});
  REQUIRE(r.trace.tasks.size() == 2);
  CHECK(r.trace.tasks[0].start_s == 0.0);
  CHECK(r.trace.tasks[1].start_s == 0.0);
  CHECK(r.trace.tasks[0].end_s == Approx(2.0));
  CHECK(r.trace.tasks[1].end_s == Approx(2.0));
  // A bus as wide as both devices' bandwidth slows neither.
  const RunResult wide = run(R"("memory_bus": "2 TB/s")", {kStream, kStream});
  CHECK(wide.trace.tasks[0].end_s == Approx(1.0));
  CHECK(wide.trace.tasks[1].end_s == Approx(1.0));
}

TEST_CASE("a GEMM beside a stream takes what it draws and the stream the rest", "[memory-bus]") {
  // Bus 1 TB/s: the GEMM draws 0.2 TB/s, below an even share, and keeps its pace (ends at 1 s); the
  // stream gets 0.8 TB/s, doing 0.8 s of its 1 s of work by then, and the last 0.2 s alone: 1.2 s.
  const RunResult r = run(R"("memory_bus": "1 TB/s")", {kGemm, kStream});
  CHECK(r.trace.tasks[0].end_s == Approx(1.0));
  CHECK(r.trace.tasks[1].end_s == Approx(1.2));
  // A bus of 1.2 TB/s carries both draws whole: neither slows.
  const RunResult enough = run(R"("memory_bus": "1.2 TB/s")", {kGemm, kStream});
  CHECK(enough.trace.tasks[0].end_s == Approx(1.0));
  CHECK(enough.trace.tasks[1].end_s == Approx(1.0));
}

TEST_CASE("the bus shares max-min among the devices drawing on it", "[memory-bus]") {
  NodeShares bus(std::vector<NodeShares::Capacity>{{.bus_Bps = 1e12}});
  std::vector<std::uint32_t> changed;
  const NodeId n = make_id<NodeId>(0);
  const std::vector<NodeId> one{n}, two{n, n};
  // A 1-s stream alone draws 1 TB/s; at 0.5 s a gang of two 1-s streams joins (two devices): three
  // devices share 1 TB/s evenly, a third each, so every one goes at a third of its solo pace.
  bus.start(1, one, {.launch_s = 0, .core_s = 1, .bytes = 1e12}, 0.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{1});
  CHECK(bus.rate_Bps(1) == Approx(1e12));
  bus.start(2, two, {.launch_s = 0, .core_s = 1, .bytes = 1e12}, 0.5, changed);
  CHECK(changed == std::vector<std::uint32_t>{1, 2});
  CHECK(bus.rate_Bps(1) == Approx(1e12 / 3));
  CHECK(bus.rate_Bps(2) == Approx(1e12 / 3));
  // Task 1 did 0.5 s alone, then goes at a third: its last 0.5 s take 1.5 s, ending at 2 s.
  CHECK(bus.reaches_s(1, 0) == Approx(2.0));
  bus.stop(1, 2.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{2});
  // The gang did 0.5 s of its 1 s by then; alone its two devices get half each: 0.5 s more at half pace.
  CHECK(bus.rate_Bps(2) == Approx(5e11));
  CHECK(bus.done_s(2, 2.0) == Approx(0.5));
  CHECK(bus.reaches_s(2, 0) == Approx(3.0));
  // A launch-bound task draws nothing and keeps its pace beside anything.
  bus.start(3, one, {.launch_s = 1, .core_s = 0, .bytes = 0}, 2.0, changed);
  CHECK(bus.reaches_s(3, 0) == Approx(3.0));
}

TEST_CASE("two GEMMs on a compute pool of 1.5 devices get 0.75 each", "[memory-bus][compute-pool]") {
  // Each draws its whole device's compute; 1.5 devices' worth between them: 0.75 each, 1 s of work in 1.333 s.
  const RunResult r = run(R"("compute_pool": 1.5)", {kGemm, kGemm});
  CHECK(r.trace.tasks[0].end_s == Approx(4.0 / 3));
  CHECK(r.trace.tasks[1].end_s == Approx(4.0 / 3));
  // A pool of two devices' worth slows neither.
  const RunResult whole = run(R"("compute_pool": 2)", {kGemm, kGemm});
  CHECK(whole.trace.tasks[0].end_s == Approx(1.0));
}

TEST_CASE("a GEMM beside a stream on a compute pool keeps nearly its pace alone", "[memory-bus][compute-pool]") {
  // The stream computes 0.01 s of its 1 s (1 TFLOP at 100 TFLOP/s): on a pool of one device's worth it
  // keeps its 0.01 and the GEMM gets 0.99, so its 1 s of compute takes 1.0101 s while the stream runs.
  // The stream ends at 1 s, the GEMM having done 0.99 s of its work; the last 0.01 s alone: 1.01 s.
  const RunResult r = run(R"("compute_pool": 1)", {kGemm, kStream});
  CHECK(r.trace.tasks[0].end_s == Approx(1.01));
  CHECK(r.trace.tasks[1].end_s == Approx(1.0));
  // Beside a GEMM instead, it gets half: 2 s.
  const RunResult gemms = run(R"("compute_pool": 1)", {kGemm, kGemm});
  CHECK(gemms.trace.tasks[0].end_s == Approx(2.0));
}

TEST_CASE("a task on a node sharing bus and compute goes at the pace of the scarcer", "[memory-bus][compute-pool]") {
  NodeShares node(std::vector<NodeShares::Capacity>{{.bus_Bps = 1e12, .compute_devices = 1}});
  std::vector<std::uint32_t> changed;
  const std::vector<NodeId> one{make_id<NodeId>(0)};
  // A GEMM (1 s, all compute, 0.2 TB/s) and a stream (1 s, 1 TB/s, 1% compute): the bus gives the GEMM
  // its 0.2 TB/s and the stream 0.8; the pool gives the stream its 0.01 and the GEMM 0.99.
  node.start(1, one, {.launch_s = 0, .core_s = 1, .bytes = 2e11, .compute_s = 1}, 0.0, changed);
  node.start(2, one, {.launch_s = 0, .core_s = 1, .bytes = 1e12, .compute_s = 0.01}, 0.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{1, 2});
  CHECK(node.rate_Bps(1) == Approx(2e11));
  CHECK(node.compute_share(1) == Approx(0.99));
  CHECK(node.rate_Bps(2) == Approx(8e11));
  CHECK(node.compute_share(2) == Approx(0.01));
  // The GEMM is slowed by compute (1 / 0.99 s), the stream by the bus (1 TB at 0.8 TB/s: 1.25 s).
  CHECK(node.reaches_s(1, 0) == Approx(1 / 0.99));
  CHECK(node.reaches_s(2, 0) == Approx(1.25));
  // The GEMM ends; alone, the stream does the rest of its work at its own pace: 0.808 s done by then.
  node.stop(1, 1 / 0.99, changed);
  CHECK(changed == std::vector<std::uint32_t>{2});
  CHECK(node.done_s(2, 1 / 0.99) == Approx(0.8 / 0.99));
  CHECK(node.reaches_s(2, 0) == Approx(1 / 0.99 + 1 - 0.8 / 0.99));
}

TEST_CASE("a node type whose devices share a memory bus cannot be time-sliced", "[memory-bus][errors]") {
  const std::string error = scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"memory_bus": "1 TB/s"}, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w"}]})");
  CHECK_THAT(error, Contains("bad.json: /cluster/nodes/0/time_slicing: a node type whose devices share a memory bus"));
  CHECK_THAT(scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"memory_bus": "-1 TB/s"}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w"}]})"),
             Contains("/cluster/nodes/0/node_overrides/memory_bus"));
  CHECK_THAT(scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"compute_pool": 1.5}, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w"}]})"),
             Contains("/cluster/nodes/0/time_slicing: a node type whose devices share a memory bus or compute"));
  // More than its devices' worth is not a pool the devices could share.
  CHECK_THAT(scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"compute_pool": 3}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w"}]})"),
             Contains("/cluster/nodes/0/node_overrides/compute_pool"));
}

// Host memory on a GPU node (host_memory_bandwidth, sim/include/fleetsim/topology.hpp): copies into and
// out of it share it, reads and writes together. unit-node-2 with two NICs puts each GPU on a PCIe
// switch of its own, each with a 50 GB/s link (2 us) up to the host.
namespace {

RunResult run_loads(const std::string& overrides, const std::string& cluster_extra = "") {
  const std::string task_a = R"({"name": "a", "model": {"id": "ma", "weights": "50 GB"}, "work": {"flop": "100 TFLOP"}})";
  const std::string task_b = R"({"name": "b", "model": {"id": "mb", "weights": "50 GB"}, "work": {"flop": "100 TFLOP"}})";
  return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"nics": 2)" + overrides +
                                R"(}}])" + cluster_extra + R"(}, "workflows": {"w": {"tasks": [)" + task_a + ", " + task_b + R"(]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
}

double load_s(const RunResult& r, std::size_t i) { return r.trace.weight_loads[i].end_s - r.trace.weight_loads[i].start_s; }

}  // namespace

TEST_CASE("two GPUs loading weights from host memory share its bandwidth", "[memory-bus][host-memory]") {
  // Alone each 50 GB load takes its own host link: 1 s plus two 2 us hops. Host memory of 50 GB/s
  // gives each 25 GB/s: 2 s. Host memory of 100 GB/s carries both whole.
  const RunResult plain = run_loads("");
  REQUIRE(plain.trace.weight_loads.size() == 2);
  CHECK(load_s(plain, 0) == Approx(1.000004).epsilon(1e-9));
  CHECK(load_s(plain, 1) == Approx(1.000004).epsilon(1e-9));
  const RunResult shared = run_loads(R"(, "host_memory_bandwidth": "50 GB/s")");
  REQUIRE(shared.trace.weight_loads.size() == 2);
  CHECK(load_s(shared, 0) == Approx(2.000004).epsilon(1e-9));
  CHECK(load_s(shared, 1) == Approx(2.000004).epsilon(1e-9));
  const RunResult wide = run_loads(R"(, "host_memory_bandwidth": "100 GB/s")");
  CHECK(load_s(wide, 0) == Approx(1.000004).epsilon(1e-9));
  // The bus is a link of the run: its bytes are both loads'.
  const std::optional<std::uint32_t> bus = shared.topology.memory_bus(make_id<NodeId>(0));
  REQUIRE(bus);
  CHECK(shared.topology.link_name(*bus) == "n0.host.memory");
  CHECK(shared.link_bytes[*bus] == Approx(100e9));
  CHECK_FALSE(plain.topology.memory_bus(make_id<NodeId>(0)));
}

TEST_CASE("a load from local storage passes through host memory and draws on it", "[memory-bus][host-memory]") {
  // Storage reads at 40 GB/s (100 us) into host memory of 30 GB/s shared by both loads: 15 GB/s each,
  // 50 GB in 3.333 s plus the three hops' latency (100 us + 2 x 2 us).
  const RunResult r = run_loads(R"(, "host_memory_bandwidth": "30 GB/s")", R"(, "storage": {"bandwidth": "40 GB/s", "latency": "100 us"})");
  REQUIRE(r.trace.weight_loads.size() == 2);
  CHECK(r.trace.weight_loads[0].from_storage);
  CHECK(load_s(r, 0) == Approx(50.0 / 15 + 104e-6).epsilon(1e-9));
  CHECK(load_s(r, 1) == Approx(50.0 / 15 + 104e-6).epsilon(1e-9));
}

TEST_CASE("an offload's writes and reads share host memory", "[memory-bus][host-memory]") {
  // As in the offload test of memory_test.cpp: 10 GB go out and back at once over the 50 GB/s host
  // link, each way on its own direction of the link (0.2 s). Host memory of 50 GB/s serves both
  // directions together: 25 GB/s each, 0.4 s.
  const std::string body = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "node_overrides": {"host_memory_bandwidth": "50 GB/s"}}]},
      "workflows": {"w": {"tasks": [{"name": "p", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "working_set": "40 GB", "work": {"flop": "100 TFLOP"}}],
                         "edges": [{"from": "p", "to": "c", "bytes": "70 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}], "memory": {"max_offload": 0.5})";
  const RunResult run = simulate(unit_scenario(body));
  const TaskRecord& c = run.trace.tasks[1];
  REQUIRE(c.offload_bytes == Approx(10e9));
  CHECK(c.compute_start_s - c.start_s == Approx(10e9 / 25e9 + 4e-6).epsilon(1e-9));
}

TEST_CASE("traffic between MIG instances is staged in host memory and draws on it twice", "[memory-bus][host-memory][mig]") {
  // As in the MIG test of memory_test.cpp: c reads 10 GB from the other instance of its GPU, staged
  // through host memory over the 50 GB/s host link (0.2 s plus four 2 us hops). Written to host memory
  // and read back, the transfer draws twice its rate on the bus: on 60 GB/s it gets 30 GB/s (0.333 s),
  // on 100 GB/s the host link's 50 GB/s again.
  const auto run = [](const std::string& bus) {
    return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "mig": {"slices": 2},
                                                            "node_overrides": {"host_memory_bandwidth": ")" + bus + R"("}}]},
        "workflows": {"w": {"tasks": [{"name": "p1", "work": {"flop": "100 TFLOP"}}, {"name": "p2", "work": {"flop": "100 TFLOP"}},
                                     {"name": "c", "working_set": "45 GB", "work": {"flop": "1 TFLOP"}}],
                           "edges": [{"from": "p1", "to": "c", "bytes": "1 GB"}, {"from": "p2", "to": "c", "bytes": "10 GB"}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  };
  const auto staging_s = [](const RunResult& r) { return r.trace.tasks[2].compute_start_s - r.trace.tasks[2].start_s; };
  const RunResult narrow = run("60 GB/s");
  CHECK(staging_s(narrow) == Approx(10e9 / 30e9 + 8e-6).epsilon(1e-9));
  const std::optional<std::uint32_t> bus = narrow.topology.memory_bus(make_id<NodeId>(0));
  REQUIRE(bus);
  CHECK(narrow.link_bytes[*bus] == Approx(20e9));  // in and out
  std::vector<std::uint32_t> route;
  narrow.topology.route(narrow.topology.gpu_vertex(make_id<GpuId>(0)), narrow.topology.gpu_vertex(make_id<GpuId>(1)), 0, route);
  CHECK(std::count(route.begin(), route.end(), *bus) == 2);
  CHECK(narrow.topology.bottleneck_Bps(route) == Approx(30e9));
  CHECK(staging_s(run("100 GB/s")) == Approx(10e9 / 50e9 + 8e-6).epsilon(1e-9));
}

TEST_CASE("a weight load takes a MIG peer's copy only where staging it costs no more than host memory", "[memory-bus][host-memory][mig]") {
  // The second job lands on the other instance while the first holds the weights. From host memory the
  // load crosses the 50 GB/s host link and the bus once; from the peer, up and down the host link and
  // the bus twice: on 60 GB/s that offers 30 GB/s (host memory wins), on 100 GB/s 50 GB/s (a tie: the peer).
  const auto second_load = [](const std::string& bus) {
    const RunResult r = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "mig": {"slices": 2},
                                                                       "node_overrides": {"host_memory_bandwidth": ")" + bus + R"("}}]},
        "workflows": {"w": {"tasks": [{"name": "t", "model": {"id": "m", "weights": "10 GB"}, "work": {"flop": "100 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "periodic", "interval": "1 s", "count": 2}}])"));
    REQUIRE(r.trace.weight_loads.size() == 2);
    return r.trace.weight_loads[1];
  };
  const WeightLoad narrow = second_load("60 GB/s");
  CHECK_FALSE(narrow.peer);
  CHECK(narrow.end_s - narrow.start_s == Approx(0.2).epsilon(1e-3));
  const WeightLoad wide = second_load("100 GB/s");
  REQUIRE(wide.peer);
  CHECK(index(*wide.peer) == 0);
}

TEST_CASE("host_memory_bandwidth must be a bandwidth, not negative", "[memory-bus][host-memory][input]") {
  const auto error = [](const std::string& value) {
    return scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "node_overrides": {"host_memory_bandwidth": ")" + value + R"("}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  CHECK_THAT(error("-1 GB/s"), Contains("bad.json: /cluster/nodes/0/node_overrides/host_memory_bandwidth: expected a bandwidth") &&
                                   Contains("must not be negative"));
  CHECK_THAT(error("3 GB"), Contains("/cluster/nodes/0/node_overrides/host_memory_bandwidth"));
  CHECK(error("3 GB/s").empty());
}
