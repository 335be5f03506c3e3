// Time-sliced GPUs: tasks computing on one GPU share it in turns (processor sharing with an
// interference factor). Times worked out by hand on the unit GPU (100 TFLOP/s, 100 GB).
#include <catch2/catch.hpp>

#include "../sim/src/shared_compute.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using fleetsim::test::unit_scenario;

namespace {

// Tasks of `seconds` solo (100 TFLOP per second), all arriving at t = 0, on `node` GPUs sliced `slicing`.
RunResult run(const std::string& node, const std::string& slicing, const std::vector<double>& seconds,
              const std::string& extra_task_fields = "") {
  std::string tasks;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    tasks += std::string(i ? ", " : "") + R"({"name": "t)" + std::to_string(i) + R"(", "work": {"flop": ")" +
             std::to_string(static_cast<int>(seconds[i] * 100)) + R"( TFLOP"})" + extra_task_fields + "}";
  }
  return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": ")" + node + R"(", "count": 1, "time_slicing": )" + slicing + R"(}]},
      "workflows": {"w": {"tasks": [)" + tasks + R"(]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
}

}  // namespace

TEST_CASE("the pace of co-running tasks", "[time-slicing]") {
  CHECK(SharedCompute::pace(1, 0.1) == 1.0);
  CHECK(SharedCompute::pace(2, 0.0) == 0.5);
  CHECK(SharedCompute::pace(2, 0.1) == Approx(1 / 2.2));
  CHECK(SharedCompute::pace(4, 0.1) == Approx(1 / 5.2));
  // Three tasks join and leave one GPU (no interference): a 3-s job alone for 1 s, then beside a 1-s job
  // until that one is done (2 s more: both at half pace), then alone again: 1 + 2 + 1 = 4 s.
  SharedCompute s({0.0});
  std::vector<std::uint32_t> changed;
  const GpuId g = make_id<GpuId>(0);
  s.start(7, std::span(&g, 1), 3.0, 0.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{7});
  s.start(9, std::span(&g, 1), 1.0, 1.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{7, 9});
  CHECK(s.reaches_s(9, 0) == Approx(3.0));
  CHECK(s.done_s(7, 3.0) == Approx(2.0));
  s.stop(9, 3.0, changed);
  CHECK(changed == std::vector<std::uint32_t>{7});
  CHECK(s.reaches_s(7, 0) == Approx(4.0));
  CHECK_FALSE(s.computing(9));
}

TEST_CASE("two tasks share a time-sliced GPU in turns, paying the interference", "[time-slicing]") {
  // A 2-s and a 1-s task on one GPU with two slots and interference 0.1: each at 1 / 2.2 of its solo
  // speed, so the 1-s task ends at 2.2 s; the 2-s one has done 1 s by then and ends alone at 3.2 s.
  // Exclusive, the second task would have waited: 2 s, then 3 s.
  const RunResult r = run("unit-node-1", R"({"tasks": 2, "interference": 0.1})", {2, 1});
  const auto& t = r.trace.tasks;
  CHECK(t[0].start_s == 0.0);
  CHECK(t[1].start_s == 0.0);
  CHECK(t[1].end_s == Approx(2.2));
  CHECK(t[0].end_s == Approx(3.2));
  // The GPU was busy 3.2 s (not 5.4): the tasks shared it, 2.1 and 1.1 GPU-seconds each.
  CHECK(r.summary.gpu_busy_s == Approx(3.2));
  CHECK(r.summary.gpu_utilization == Approx(1.0));
  CHECK(r.summary.tenants[0].gpu_s == Approx(3.2));
}

TEST_CASE("a time-sliced GPU runs no more tasks than its slots, idle GPUs are used first", "[time-slicing]") {
  // Three 1-s tasks, one GPU with two slots, no interference: two share it and end at 2 s, the third
  // waits for a slot and ends at 3 s.
  const RunResult one = run("unit-node-1", R"({"tasks": 2})", {1, 1, 1});
  const auto& t = one.trace.tasks;
  CHECK(t[0].end_s == Approx(2.0));
  CHECK(t[1].end_s == Approx(2.0));
  CHECK(t[2].start_s == Approx(2.0));
  CHECK(t[2].end_s == Approx(3.0));
  // Two GPUs: two tasks each get their own, and end at 1 s.
  const RunResult two = run("unit-node-2", R"({"tasks": 2})", {1, 1});
  CHECK(two.trace.tasks[0].end_s == Approx(1.0));
  CHECK(two.trace.tasks[1].end_s == Approx(1.0));
  CHECK(two.trace.gpus[two.trace.tasks[0].gpu_begin] != two.trace.gpus[two.trace.tasks[1].gpu_begin]);
}

TEST_CASE("a gang on time-sliced GPUs goes at the pace of its most shared GPU", "[time-slicing]") {
  // A 2-GPU gang (1 s per GPU) takes both GPUs; a 0.5-s task then shares GPU 0. Both go at half pace
  // (the gang held back by GPU 0) until the small task ends at 1 s; the gang, half done, ends at 1.5 s.
  const RunResult r = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "gang", "gpus": 2, "work": {"flop": "200 TFLOP"}}, {"name": "small", "work": {"flop": "50 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const auto& t = r.trace.tasks;
  CHECK(t[1].start_s == 0.0);
  CHECK(t[1].end_s == Approx(1.0));
  CHECK(t[0].end_s == Approx(1.5));
}

TEST_CASE("co-runners share VRAM: a task that does not fit beside them waits", "[time-slicing][memory]") {
  // Each 1-s task needs 60 GB of the GPU's 100 GB: they cannot share it and run one after the other.
  const RunResult r = run("unit-node-1", R"({"tasks": 4})", {1, 1}, R"(, "working_set": "60 GB")");
  CHECK(r.trace.tasks[1].start_s == Approx(1.0));
  CHECK(r.summary.makespan_s == Approx(2.0));
}

TEST_CASE("a tenant with private GPUs does not share a time-sliced GPU", "[time-slicing][pinning]") {
  const auto second_start = [](bool isolated) {
    const RunResult r = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "time_slicing": {"tasks": 2}}]},
        "tenants": [{"name": "a", "private_gpus": )" + std::string(isolated ? "true" : "false") + R"(}, {"name": "b"}],
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
        "workload": [{"tenant": "a", "workflow": "w", "arrival": {"process": "once"}},
                     {"tenant": "b", "workflow": "w", "arrival": {"process": "once"}}])"));
    return r.trace.tasks[1].start_s;
  };
  // Shared: b starts beside a at once. Private: b waits for a's 1 s.
  CHECK(second_start(false) == 0.0);
  CHECK(second_start(true) == Approx(1.0));
}

TEST_CASE("a failure on a time-sliced GPU stops every co-runner, checkpoints keep the solo work done", "[time-slicing][faults]") {
  // Two 10-s tasks share the GPU at half pace (no interference). The GPU fails at 4 s for 1 s: each has
  // done 2 s of solo work, checkpointed every 1 s, so both keep 2 s. At 5 s both resume with 8 s left
  // plus a 0.5-s restore, at half pace again: 8.5 / 0.5 = 17 s, ending at 22 s.
  const RunResult r = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "a", "work": {"flop": "1000 TFLOP"}}, {"name": "b", "work": {"flop": "1000 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
      "faults": {"events": [{"at": "4 s", "gpu": "n0.g0", "for": "1 s"}], "retry": {"max_attempts": 2, "backoff": "0 s"},
                 "checkpoint": {"interval": "1 s", "restore": "0.5 s"}})"));
  CHECK(r.summary.tasks_stopped == 2);
  CHECK(r.trace.tasks[0].end_s == Approx(22.0));
  CHECK(r.trace.tasks[1].end_s == Approx(22.0));
}

TEST_CASE("time slicing settings are checked and a sliced run is deterministic", "[time-slicing][errors]") {
  const auto error = [](const std::string& slicing) {
    return fleetsim::test::scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
        "cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "time_slicing": )" + slicing + R"(}]},
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  CHECK(error(R"({"tasks": 4, "interference": 0.05})") == "");
  CHECK_THAT(error(R"({"tasks": 1})"), Catch::Contains("/cluster/nodes/0/time_slicing/tasks"));
  CHECK_THAT(error(R"({"interference": 0.1})"), Catch::Contains("/cluster/nodes/0/time_slicing/tasks"));
  CHECK_THAT(error(R"({"tasks": 2, "interference": 2})"), Catch::Contains("/cluster/nodes/0/time_slicing/interference"));
  CHECK_THAT(error(R"({"tasks": 2, "slices": 2})"), Catch::Contains("slices"));
  const auto a = run("unit-node-2", R"({"tasks": 3, "interference": 0.2})", {1, 2, 3, 1.5, 0.7, 2.2, 4});
  const auto b = run("unit-node-2", R"({"tasks": 3, "interference": 0.2})", {1, 2, 3, 1.5, 0.7, 2.2, 4});
  CHECK(summary_json(a.summary) == summary_json(b.summary));
}
