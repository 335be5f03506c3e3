// Real execution on the CPU backend: the kernels compute what they claim, and a replayed plan runs
// the same tasks on the same devices, in an order that respects every dependency and device.
#include <catch2/catch.hpp>
#include <barrier>
#include <random>
#include <thread>

#include "fleetsim/cpu_kernels.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/trace_diff.hpp"
#include "helpers.hpp"
#include "replay_check.hpp"

using namespace fleetsim;

namespace {

// Runs `op` over `ranks` threads on random buffers; returns the buffers before and after.
std::pair<std::vector<std::vector<float>>, std::vector<std::vector<float>>> run_collective(CollectiveOp op, std::size_t ranks,
                                                                                          std::size_t count) {
  std::mt19937 rng(static_cast<unsigned>(ranks * 1000 + count));
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<std::vector<float>> buffers(ranks, std::vector<float>(2 * count));
  for (auto& b : buffers) {
    for (float& x : b) x = value(rng);
  }
  const auto before = buffers;
  std::vector<float*> pointers;
  for (auto& b : buffers) pointers.push_back(b.data());
  std::barrier step(static_cast<std::ptrdiff_t>(ranks));
  {
    std::vector<std::jthread> threads;
    for (std::size_t r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] { cpu::collective(op, pointers, count, r, [&] { step.arrive_and_wait(); }); });
    }
  }
  return {before, buffers};
}

const Scenario& validation_scenario() {
  static const Scenario sc = scale_work(load_scenario(test::source_dir() + "/scenarios/cpu-validate.json"), 0.05);
  return sc;
}

}  // namespace

TEST_CASE("the CPU backend's ring all-reduce leaves the element-wise sum in every buffer") {
  for (std::size_t ranks : {2u, 3u, 4u}) {
    for (std::size_t count : {1u, 7u, 1000u}) {
      const auto [before, after] = run_collective(CollectiveOp::all_reduce, ranks, count);
      for (std::size_t i = 0; i < count; ++i) {
        double sum = 0;
        for (const auto& b : before) sum += b[i];
        for (const auto& a : after) REQUIRE(a[i] == Approx(sum).margin(1e-5));
      }
    }
  }
}

TEST_CASE("the CPU backend's all-gather gives every rank every rank's chunk") {
  const std::size_t ranks = 4, count = 100;
  const auto [before, after] = run_collective(CollectiveOp::all_gather, ranks, count);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t owner = i * ranks / count;  // chunk k is [k count / ranks, (k+1) count / ranks)
      REQUIRE(after[r][i] == before[owner][i]);
    }
  }
}

TEST_CASE("a replayed plan runs the same tasks on the same devices, respecting dependencies and devices") {
  const Scenario& sc = validation_scenario();
  const RunResult plan = simulate(sc);
  std::size_t progress_calls = 0;
  const RunResult measured = execute_on_cpu(sc, plan, {.progress = [&](std::size_t, std::size_t) { ++progress_calls; }});
  CHECK(test::replay_problems(sc, plan, measured) == std::vector<std::string>{});
  CHECK(progress_calls == plan.trace.tasks.size());
  CHECK(measured.summary.tasks.completed == plan.summary.tasks.completed);
  CHECK(!plan.trace.weight_loads.empty());
  CHECK(measured.summary.weight_loads == plan.summary.weight_loads);
  const TraceDiff diff = diff_traces(plan.trace, measured.trace);
  CHECK(diff.tasks.size() == plan.trace.tasks.size());
  CHECK(diff.measured_makespan_s > 0);
}

TEST_CASE("a gang with two collectives runs both on the CPU backend, one after the other") {
  Scenario sc = validation_scenario();
  TaskSpec& gang = sc.workflows[0].tasks[3];
  REQUIRE(gang.collectives.size() == 1);
  gang.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_gather, .bytes = gang.collectives[0].bytes / 2, .overlap = 0.5});
  const RunResult plan = simulate(sc);
  const RunResult measured = execute_on_cpu(sc, plan, {});
  CHECK(test::replay_problems(sc, plan, measured) == std::vector<std::string>{});
  CHECK(measured.summary.tasks.completed == plan.summary.tasks.completed);
  std::size_t gangs = 0, communicated = 0;
  for (const TaskRecord& r : plan.trace.tasks) gangs += r.task == 3 && r.status == TaskStatus::completed && r.gpu_count > 1;
  for (const TaskRecord& r : measured.trace.tasks) communicated += r.task == 3 && r.comm_start_s != kNever && r.comm_start_s <= r.end_s;
  CHECK(gangs == 3);  // the scenario's three arrivals
  CHECK(communicated == gangs);
}

TEST_CASE("the replay check finds a task moved to another device, a phase out of order and a missing load") {
  const Scenario& sc = validation_scenario();
  const RunResult plan = simulate(sc);
  RunResult measured = execute_on_cpu(sc, plan);
  REQUIRE(test::replay_problems(sc, plan, measured).empty());
  // Each change is made, checked and undone.
  auto found = [&](auto& field, auto value) {
    const auto kept = field;
    field = value;
    const bool any = !test::replay_problems(sc, plan, measured).empty();
    field = kept;
    return any;
  };
  Trace& t = measured.trace;
  const TaskRecord& lone = *std::find_if(t.tasks.begin(), t.tasks.end(), [](const TaskRecord& r) { return r.gpu_count == 1; });
  CHECK(found(t.gpus[lone.gpu_begin], make_id<GpuId>(1 - index(t.gpus[lone.gpu_begin]))));
  CHECK(found(t.tasks.back().start_s, t.tasks.back().ready_s - 1e-3));
  CHECK(found(t.weight_loads.front().start_s, kNever));
  CHECK(found(t.tasks.front().status, TaskStatus::failed));
}

TEST_CASE("the CPU backend refuses a plan that would not fit in this machine's memory, naming the way out") {
  const ScenarioEdit roomy{"/cluster/nodes/0/gpu_overrides", R"({"vram": "1 PB"})"};
  const Scenario huge = scale_work(load_scenario(test::source_dir() + "/scenarios/cpu-validate.json", {&roomy, 1}), 1e5);
  const RunResult plan = simulate(huge);
  REQUIRE_THROWS_WITH(execute_on_cpu(huge, plan), Catch::Contains("--work-scale"));
  CHECK(cpu_seconds_estimate(huge, plan) > 1e4);
}

TEST_CASE("traces of different tasks cannot be compared") {
  const RunResult a = simulate(validation_scenario());
  Trace shorter = a.trace;
  shorter.tasks.pop_back();
  REQUIRE_THROWS_AS(diff_traces(a.trace, shorter), std::invalid_argument);
  Trace moved = a.trace;
  moved.gpus[moved.tasks[0].gpu_begin] = make_id<GpuId>(1 - index(moved.gpus[moved.tasks[0].gpu_begin]));
  REQUIRE_THROWS_AS(diff_traces(a.trace, moved), std::invalid_argument);
}

TEST_CASE("against several runs, each task's error is taken from its median, with the run-to-run noise beside it") {
  // The plan itself, and three "runs" whose every task and the makespan took 0.9x, 1x and 1.3x the
  // plan's durations (each task stretched about its own start): the medians are the plan's, so every
  // error is 0; the noise is the median deviation from the median, 10% (0.1, 0, 0.3).
  const RunResult plan = simulate(validation_scenario());
  std::vector<Trace> runs;
  for (double f : {0.9, 1.0, 1.3}) {
    Trace t = plan.trace;
    for (TaskRecord& r : t.tasks) r.end_s = r.start_s + f * (r.end_s - r.start_s);
    runs.push_back(std::move(t));
  }
  const TraceDiff diff = diff_traces(plan.trace, runs);
  CHECK(diff.runs == 3);
  REQUIRE(diff.tasks.size() == plan.trace.tasks.size());
  CHECK(diff.median_abs_error == Approx(0).margin(1e-12));
  CHECK(diff.max_abs_error == Approx(0).margin(1e-12));
  CHECK(diff.task_noise == Approx(0.1));
  // One run alone: its error, and no noise.
  const TraceDiff one = diff_traces(plan.trace, runs[2]);
  CHECK(one.runs == 1);
  CHECK(one.median_abs_error == Approx(0.3 / 1.3));
  CHECK(one.task_noise == 0);
  REQUIRE_THROWS_AS(diff_traces(plan.trace, std::span<const Trace>()), std::invalid_argument);
}

TEST_CASE("scaling the work scales every size of a task and nothing else") {
  const Scenario& base = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  const Scenario half = scale_work(base, 0.5);
  const TaskSpec& a = base.workflows[0].tasks[3];
  const TaskSpec& b = half.workflows[0].tasks[3];
  CHECK(b.flop == a.flop / 2);
  CHECK(b.bytes == a.bytes / 2);
  CHECK(b.working_set_bytes == a.working_set_bytes / 2);
  CHECK(b.collectives[0].bytes == a.collectives[0].bytes / 2);
  CHECK(b.launches == a.launches);
  CHECK(half.workflows[0].edges[0].bytes == base.workflows[0].edges[0].bytes / 2);
}
