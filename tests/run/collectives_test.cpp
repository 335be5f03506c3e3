// The collectives component alone: a plan is played step by step and given back after its last step;
// a collective whose algorithm does not apply, or whose gang failed links have split, does not start.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/collectives.hpp"

using namespace fleetsim;

namespace {

// Two 1-GPU nodes under one switch: a gang across them talks over the NICs.
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        topology(cluster, sc.cluster.fabric),
        collectives(cluster, topology) {
    collectives.size_tasks({.tasks = 4});
    all_reduce.bytes = 64e6;
  }
  Scenario sc;
  Cluster cluster;
  Topology topology;
  run::Collectives collectives;
  CollectiveSpec all_reduce;
  const std::vector<GpuId> gang{make_id<GpuId>(0), make_id<GpuId>(1)};
};

const TaskId kA = make_id<TaskId>(0), kB = make_id<TaskId>(1);

// The (from, to) GPUs of every flow a send-recv `spec` plays on a gang of eight unit GPUs on two nodes, and the
// bytes each pair's flows carry.
std::map<std::pair<std::uint32_t, std::uint32_t>, double> send_bytes_of_eight(const CollectiveSpec& spec) {
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const Cluster cluster(sc.cluster);
  const Topology topology(cluster, sc.cluster.fabric);
  run::Collectives collectives(cluster, topology);
  collectives.size_tasks({.tasks = 1});
  std::vector<GpuId> gang;
  std::map<std::uint32_t, std::uint32_t> gpu_of_vertex;
  for (std::uint32_t g = 0; g < 8; ++g) {
    gang.push_back(make_id<GpuId>(g));
    gpu_of_vertex[topology.gpu_vertex(make_id<GpuId>(g))] = g;
  }
  REQUIRE_FALSE(collectives.begin(kA, 0, spec, gang));
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> bytes;
  while (const std::vector<CollectiveFlow>* step = collectives.next_step(kA, 0)) {
    for (const CollectiveFlow& f : *step) bytes[{gpu_of_vertex.at(f.from), gpu_of_vertex.at(f.to)}] += f.bytes;
  }
  return bytes;
}
std::set<std::pair<std::uint32_t, std::uint32_t>> send_pairs_of_eight(const CollectiveSpec& spec) {
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (const auto& [pair, bytes] : send_bytes_of_eight(spec)) pairs.insert(pair);
  return pairs;
}

}  // namespace

TEST_CASE("a collective is played step by step and its plan given back after the last", "[run][collectives]") {
  Fixture f;
  const CollectivePlan plan = plan_collective(f.cluster, f.topology, f.all_reduce.op, f.all_reduce.algo, f.gang, f.all_reduce.bytes);
  REQUIRE(!plan.steps.empty());
  CHECK_FALSE(f.collectives.begin(kA, 0, f.all_reduce, f.gang));
  CHECK_FALSE(f.collectives.begin(kB, 0, f.all_reduce, f.gang));  // two at once, each with its own plan
  for (std::size_t step = 0; step < plan.steps.size(); ++step) {
    const std::vector<CollectiveFlow>* flows = f.collectives.next_step(kA, 0);
    REQUIRE(flows != nullptr);
    CHECK(flows->size() == plan.steps[step].size());
  }
  CHECK(f.collectives.running(kA));
  CHECK(f.collectives.next_step(kA, 0) == nullptr);  // after the last step
  CHECK_FALSE(f.collectives.running(kA));
  CHECK(f.collectives.running(kB));
  f.collectives.drop(kB);  // stopped mid-collective
  CHECK_FALSE(f.collectives.running(kB));
}

TEST_CASE("a task's collectives play apart, each awaiting its own step's flows", "[run][collectives]") {
  Fixture f;
  CollectiveSpec gather = f.all_reduce;
  gather.op = CollectiveOp::all_gather;
  gather.bytes = 8e6;
  const CollectivePlan reduce_plan = plan_collective(f.cluster, f.topology, f.all_reduce.op, f.all_reduce.algo, f.gang, f.all_reduce.bytes);
  const CollectivePlan gather_plan = plan_collective(f.cluster, f.topology, gather.op, gather.algo, f.gang, gather.bytes);
  CHECK_FALSE(f.collectives.begin(kA, 0, f.all_reduce, f.gang));
  CHECK_FALSE(f.collectives.begin(kA, 1, gather, f.gang));
  const std::vector<CollectiveFlow>* reduce_step = f.collectives.next_step(kA, 0);
  const std::vector<CollectiveFlow>* gather_step = f.collectives.next_step(kA, 1);
  REQUIRE(reduce_step != nullptr);
  REQUIRE(gather_step != nullptr);
  CHECK(reduce_step->front().bytes == Approx(reduce_plan.steps[0].front().bytes));
  CHECK(gather_step->front().bytes == Approx(gather_plan.steps[0].front().bytes));
  // The all-reduce's step ends with its own last flow, whatever the gather's flows do.
  const std::size_t reduce_flows = reduce_plan.steps[0].size(), gather_flows = gather_plan.steps[0].size();
  for (std::size_t i = 0; i + 1 < reduce_flows; ++i) CHECK_FALSE(f.collectives.delivered(kA, 0));
  for (std::size_t i = 0; i + 1 < gather_flows; ++i) CHECK_FALSE(f.collectives.delivered(kA, 1));
  CHECK(f.collectives.delivered(kA, 0));
  CHECK(f.collectives.delivered(kA, 1));
  // The gather ends after its steps; the all-reduce still runs.
  for (std::size_t step = 1; step < gather_plan.steps.size(); ++step) REQUIRE(f.collectives.next_step(kA, 1) != nullptr);
  CHECK(f.collectives.next_step(kA, 1) == nullptr);
  CHECK_FALSE(f.collectives.delivered(kA, 1));  // a flow of a collective no longer running
  CHECK(f.collectives.running(kA));  // the all-reduce, not yet asked for its next step
  f.collectives.drop(kA);
  CHECK_FALSE(f.collectives.running(kA));
  // Their slots are reused: two new plans, neither mixed up with the other.
  CHECK_FALSE(f.collectives.begin(kB, 1, gather, f.gang));
  CHECK_FALSE(f.collectives.begin(kB, 0, f.all_reduce, f.gang));
  CHECK(f.collectives.next_step(kB, 0)->front().bytes == Approx(reduce_plan.steps[0].front().bytes));
  CHECK(f.collectives.next_step(kB, 1)->front().bytes == Approx(gather_plan.steps[0].front().bytes));
}

TEST_CASE("a collective's groups start at its offset: a pipeline's odd stage boundaries", "[run][collectives]") {
  // Eight unit GPUs on two nodes as four stages of two (ranks 2 s and 2 s + 1): send-recv pairs a stage
  // apart, from stage 1 on, are (2, 4) and (3, 5): stages 1 and 2 only (stages 3 and 4 would need ranks 8, 9).
  const CollectiveSpec odd{.op = CollectiveOp::send_recv, .bytes = 1e6, .group_size = 2, .group_stride = 2, .group_offset = 2};
  CHECK(send_pairs_of_eight(odd) == std::set<std::pair<std::uint32_t, std::uint32_t>>{{2, 4}, {4, 2}, {3, 5}, {5, 3}});
}

TEST_CASE("mirrored groups pair each block's ranks with the same ranks of the block as far from the end: DualPipe's stage pairs", "[run][collectives][dualpipe]") {
  // The same eight GPUs as four stages of two, groups of one rank two apart, mirrored: stage 0 with stage 3, stage 1
  // with stage 2, each TP rank apart: {0, 6}, {1, 7}, {2, 4}, {3, 5}.
  const CollectiveSpec mirrored{.op = CollectiveOp::send_recv, .bytes = 1e6, .group_size = 1, .group_stride = 2, .mirrored = true};
  CHECK(send_pairs_of_eight(mirrored) ==
        std::set<std::pair<std::uint32_t, std::uint32_t>>{{0, 6}, {6, 0}, {1, 7}, {7, 1}, {2, 4}, {4, 2}, {3, 5}, {5, 3}});
}

TEST_CASE("groups carry their own block's bytes where the blocks' data differ: a pipeline's stages", "[run][collectives][dualpipe]") {
  // Two blocks of four (two groups of two, two apart, a block): the first block's pairs send 1 MB, the second's 3 MB.
  const CollectiveSpec staged{.op = CollectiveOp::send_recv, .bytes = 3e6, .group_size = 2, .group_stride = 2, .block_bytes = {1e6, 3e6}};
  using Pair = std::pair<std::uint32_t, std::uint32_t>;
  const std::map<Pair, double> bytes = send_bytes_of_eight(staged);
  REQUIRE(bytes.size() == 8);
  for (const auto& [pair, sent] : bytes) CHECK(sent == (pair.first < 4 ? 1e6 : 3e6));
  // Mirrored, four stages of two: a pair of stages carries its first stage's bytes (stages 0 and 3: 1 MB; 1 and 2: 2 MB).
  const CollectiveSpec mirrored{.op = CollectiveOp::send_recv, .bytes = 2e6, .group_size = 1, .group_stride = 2, .mirrored = true, .block_bytes = {1e6, 2e6, 2e6, 1e6}};
  const std::map<Pair, double> pairs = send_bytes_of_eight(mirrored);
  REQUIRE(pairs.size() == 8);
  for (const Pair& end : {Pair{0, 6}, Pair{6, 0}, Pair{1, 7}, Pair{7, 1}}) CHECK(pairs.at(end) == 1e6);
  for (const Pair& middle : {Pair{2, 4}, Pair{4, 2}, Pair{3, 5}, Pair{5, 3}}) CHECK(pairs.at(middle) == 2e6);
}

TEST_CASE("compression shrinks the bytes a collective plans", "[run][collectives]") {
  Fixture f;
  f.all_reduce.compression = 0.25;
  CHECK_FALSE(f.collectives.begin(kA, 0, f.all_reduce, f.gang));
  const CollectivePlan full = plan_collective(f.cluster, f.topology, f.all_reduce.op, f.all_reduce.algo, f.gang, f.all_reduce.bytes);
  const std::vector<CollectiveFlow>* first = f.collectives.next_step(kA, 0);
  REQUIRE(first != nullptr);
  REQUIRE(first->size() == full.steps[0].size());
  CHECK(first->front().bytes == Approx(0.25 * full.steps[0].front().bytes));
}

TEST_CASE("a collective whose algorithm does not apply, or whose gang is cut off, does not start", "[run][collectives]") {
  Fixture f;
  CollectiveSpec direct = f.all_reduce;
  direct.algo = CollectiveAlgo::direct;  // point-to-point exchanges only: no all-reduce
  REQUIRE_FALSE(algorithm_applies(f.cluster, f.topology, direct.op, direct.algo, f.gang));
  const auto blocked = f.collectives.begin(kA, 0, direct, f.gang);
  REQUIRE(blocked);
  CHECK_FALSE(blocked->cut);
  CHECK(blocked->reason == "direct cannot run all-reduce on the GPUs it was placed on");
  CHECK_FALSE(f.collectives.running(kA));

  // Node n1's NIC cable fails both ways: its GPU is cut off from the gang's first.
  for (std::uint32_t l = 0; l < f.topology.links().size(); ++l) {
    const std::string name = f.topology.link_name(l);
    if (name.find("n1.") != std::string::npos && name.find("nic") != std::string::npos) f.topology.set_link_down(l, true);
  }
  REQUIRE(f.topology.any_link_down());
  const auto cut = f.collectives.begin(kB, 0, f.all_reduce, f.gang);
  REQUIRE(cut);
  CHECK(cut->cut);
  CHECK(cut->reason == "link failures left no route from GPU " + f.cluster.gpu_name(f.gang[0]) + " to GPU " + f.cluster.gpu_name(f.gang[1]));
}
