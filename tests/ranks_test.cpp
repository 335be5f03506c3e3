// A replay over several processes, the parts without MPI: one rank per device that runs work, and the
// ranks' measured phase times merged into one trace (a phase ends when its last member ends it).
#include <catch2/catch.hpp>
#include <set>

#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/scenario.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

RunResult two_node_plan() {
  const std::vector<ScenarioEdit> edits{{"/cluster/nodes/0/count", "2"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json", edits);
  return simulate(sc);
}

// Two records: a gang of two that communicates, and a lone task; one weight load.
Trace small_trace() {
  Trace t;
  t.tasks.resize(2);
  t.tasks[0].gpu_count = 2;
  t.tasks[1].gpu_count = 1;
  t.weight_loads.resize(1);
  return t;
}

}  // namespace

TEST_CASE("each device that runs work is one rank, in device order", "[realexec][ranks]") {
  RunResult plan = two_node_plan();
  REQUIRE(plan.cluster.node_count() == 2);
  REQUIRE(plan.cluster.gpu_count() == 4);
  // Wherever the policy put the work, move every lone task onto device 3, leaving 2 idle.
  std::set<std::uint32_t> used;
  for (TaskRecord& r : plan.trace.tasks) {
    if (r.status == TaskStatus::completed && r.gpu_count == 1) plan.trace.gpus[r.gpu_begin] = make_id<GpuId>(3);
    for (std::uint32_t m = 0; r.status == TaskStatus::completed && m < r.gpu_count; ++m) used.insert(index(plan.trace.gpus[r.gpu_begin + m]));
  }
  REQUIRE(used.contains(3));
  REQUIRE(!used.contains(2));
  const std::vector<int> ranks = rank_of_each_gpu(plan, static_cast<unsigned>(used.size()));
  REQUIRE(ranks.size() == 4);
  int next = 0;
  for (std::uint32_t g = 0; g < 4; ++g) CHECK(ranks[g] == (used.contains(g) ? next++ : -1));
  CHECK_THROWS_WITH(rank_of_each_gpu(plan, 4), Catch::Contains("mpirun -np " + std::to_string(used.size())));
  CHECK_THROWS_AS(rank_of_each_gpu(plan, 1), DeviceError);
}

TEST_CASE("a plan's idle devices get no rank", "[realexec][ranks]") {
  const RunResult plan = simulate(load_scenario(test::source_dir() + "/scenarios/cpu-validate.json"));
  const std::vector<int> ranks = rank_of_each_gpu(plan, 2);
  CHECK(ranks == std::vector<int>{0, 1});
}

TEST_CASE("ranks' reports travel as bytes and come back the same", "[realexec][ranks]") {
  RankReport report;
  report.members.push_back({.record = 7, .member = 1, .arrived_s = 0.5, .loaded_s = 0.75, .computed_s = 1.0, .done_s = 1.25, .failure = ""});
  report.members.push_back({.record = 9, .member = 0, .arrived_s = 2, .loaded_s = 3, .computed_s = 0, .done_s = 4,
                            .failure = std::string("graph/gang on n1.g0: ncclAllReduce failed\0binary", 48)});
  report.loads.push_back({.load = 3, .start_s = 0.5, .end_s = 0.625});
  const RankReport back = decode_rank_report(encode_rank_report(report));
  REQUIRE(back.members.size() == 2);
  CHECK(back.members[0].record == 7);
  CHECK(back.members[0].member == 1);
  CHECK(back.members[0].done_s == 1.25);
  CHECK(back.members[1].failure == report.members[1].failure);
  REQUIRE(back.loads.size() == 1);
  CHECK(back.loads[0].end_s == 0.625);
  const std::string bytes = encode_rank_report(report);
  CHECK_THROWS_AS(decode_rank_report(bytes.substr(0, bytes.size() - 1)), std::invalid_argument);
  CHECK_THROWS_AS(decode_rank_report(bytes + "x"), std::invalid_argument);
  CHECK(decode_rank_report(encode_rank_report({})).members.empty());
}

TEST_CASE("merged reports give each phase its last member's time and the lowest member's failure", "[realexec][ranks]") {
  Trace trace = small_trace();
  // Rank 0 ran member 0 of the gang and the lone task; rank 1 ran member 1 of the gang, which failed.
  RankReport rank0, rank1;
  rank0.members.push_back({.record = 0, .member = 0, .arrived_s = 1.0, .loaded_s = 1.5, .computed_s = 2.5, .done_s = 3.0, .failure = ""});
  rank0.members.push_back({.record = 1, .member = 0, .arrived_s = 4.0, .loaded_s = 4.5, .computed_s = 0, .done_s = 5.0, .failure = ""});
  rank0.loads.push_back({.load = 0, .start_s = 4.0, .end_s = 4.25});
  rank1.members.push_back({.record = 0, .member = 1, .arrived_s = 1.25, .loaded_s = 1.25, .computed_s = 2.0, .done_s = 3.5,
                           .failure = "out of memory on n1.g0"});
  const std::vector<RankReport> reports{rank1, rank0};  // arrival order does not matter
  merge_rank_reports(trace, reports, [](std::uint32_t record) { return record == 0; });
  const TaskRecord& gang = trace.tasks[0];
  CHECK(gang.start_s == 1.25);
  CHECK(gang.compute_start_s == 1.5);
  CHECK(gang.comm_start_s == 2.5);
  CHECK(gang.end_s == 3.5);
  CHECK(gang.status == TaskStatus::failed);
  CHECK(trace.reasons[gang.reason] == "out of memory on n1.g0");
  const TaskRecord& lone = trace.tasks[1];
  CHECK(lone.start_s == 4.0);
  CHECK(lone.comm_start_s == kNever);  // it does not communicate
  CHECK(lone.end_s == 5.0);
  CHECK(lone.status == TaskStatus::queued);  // the caller sets completed; merging only fails
  CHECK(trace.weight_loads[0].start_s == 4.0);
  CHECK(trace.weight_loads[0].end_s == 4.25);
  RankReport stray;
  stray.members.push_back({.record = 2, .member = 0, .arrived_s = 0, .loaded_s = 0, .computed_s = 0, .done_s = 0, .failure = ""});
  CHECK_THROWS_AS(merge_rank_reports(trace, std::span(&stray, 1), [](std::uint32_t) { return false; }), std::invalid_argument);
}
