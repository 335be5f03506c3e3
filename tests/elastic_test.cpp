// Elastic training tasks: they grow onto GPUs that free up and shrink for waiting tasks, paying a
// restart each time and keeping the work done. The end times are worked out by hand on unit GPUs
// (100 TFLOP/s, so 100 TFLOP is one GPU-second); resizes respect the minimum interval; bad elastic
// specs are refused with the field named; runs are deterministic and keep every invariant.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

// One 4-GPU node. "train" is 10000 TFLOP (100 GPU-seconds) of data-parallel work on up to 4 GPUs,
// elastic as `elastic` says; `other` is a second workflow; `workload` the arrivals.
Scenario elastic_node(const std::string& other, const std::string& workload, const std::string& elastic) {
  return test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"other": )" + other + R"(,
                    "train": {"tasks": [{"name": "t", "gpus": 4, "work": {"flop": "10000 TFLOP"}, "elastic": )" + elastic + R"(}]}},
      "workload": )" + workload);
}

// From 1 to 4 GPUs, a 2-s restart, at most one resize per 5 s.
const std::string kElastic = R"({"min_gpus": 1, "restart": "2 s", "min_interval": "5 s"})";

// A 3-GPU gang of 10 s (3000 TFLOP) and the elastic job, both at t = 0, the gang first.
const std::string kGang3 = R"({"tasks": [{"name": "b", "gpus": 3, "work": {"flop": "3000 TFLOP"}}]})";
const std::string kBothAtZero = R"([{"workflow": "other", "arrival": {"process": "once"}}, {"workflow": "train", "arrival": {"process": "once"}}])";

// A 2-GPU gang of 10 s (2000 TFLOP) arriving at t = 10 s while the elastic job holds the node.
const std::string kGang2 = R"({"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "2000 TFLOP"}}]})";
const std::string kGangAt10 = R"([{"workflow": "train", "arrival": {"process": "once"}}, {"workflow": "other", "arrival": {"process": "times", "times": ["10 s"]}}])";

// The first task of the workflow with this id.
const TaskRecord& task_of(const Scenario& sc, const RunResult& run, const std::string& workflow) {
  for (const TaskRecord& t : run.trace.tasks) {
    if (sc.workflows[t.workflow].id == workflow) return t;
  }
  throw std::logic_error("no task of workflow " + workflow);
}

}  // namespace

TEST_CASE("an elastic job grows when GPUs free up: the hand-computed end", "[elastic]") {
  // t = 0: the 3-GPU gang takes three GPUs; the job asks for what is left, one GPU (at 1 GPU its
  // 100 GPU-s take 100 s). t = 10: the gang ends; the job has done 10 of 100 GPU-s (progress 0.1),
  // grows to 4 GPUs and pays its 2-s restart, then computes the other 90 GPU-s at 4 GPUs: 22.5 s.
  // It ends at 10 + 2 + 22.5 = 34.5 s. The GPUs are busy throughout: 3 x 10 + 1 x 10 + 4 x 24.5 = 138 GPU-s.
  const Scenario sc = elastic_node(kGang3, kBothAtZero, kElastic);
  const RunResult run = simulate(sc, {.record_link_samples = true});
  const TaskRecord& job = task_of(sc, run, "train");
  REQUIRE(job.status == TaskStatus::completed);
  CHECK(job.start_s == Approx(0.0));
  CHECK(job.resized_s == Approx(10.0));
  CHECK(job.gpu_count == 4);
  CHECK(job.end_s == Approx(34.5));
  REQUIRE(run.trace.left_gangs.size() == 1);
  CHECK(run.trace.left_gangs[0].gpu_count == 1);
  CHECK(run.trace.left_gangs[0].start_s == Approx(0.0));
  CHECK(run.trace.left_gangs[0].end_s == Approx(10.0));
  CHECK(run.summary.resizes == 1);
  CHECK(run.summary.restart_gpu_s == Approx(8.0));  // 2 s on 4 GPUs
  CHECK(run.summary.gpu_busy_s == Approx(138.0));
  CHECK(run.summary.gpu_utilization == Approx(1.0));
  // A resize is not a failure, a stop or a retry.
  CHECK(run.summary.tasks_stopped == 0);
  CHECK(run.summary.retries == 0);
  CHECK(run.summary.lost_gpu_s == Approx(0.0).margin(1e-9));
  std::map<std::string, int> kinds;
  for (const Decision& d : run.trace.decisions) ++kinds[std::string(decision_kind_name(d.kind))];
  CHECK(kinds["placed"] == 2);
  CHECK(kinds["resized"] == 1);
  const Decision& resized = run.trace.decisions.back();
  CHECK(resized.kind == DecisionKind::resized);
  CHECK(resized.gpu_count == 4);
  CHECK(run.trace.reasons[resized.reason] == "grew from 1 to 4 GPUs onto free ones");

  SECTION("without elasticity (min_gpus = gpus) the job waits for all four GPUs and ends later, at 10 + 25 = 35 s") {
    const Scenario rigid = elastic_node(kGang3, kBothAtZero, R"({"min_gpus": 4, "restart": "2 s"})");
    const RunResult fixed = simulate(rigid);
    CHECK(task_of(rigid, fixed, "train").start_s == Approx(10.0));
    CHECK(task_of(rigid, fixed, "train").end_s == Approx(35.0));
    CHECK(fixed.summary.resizes == 0);
  }
}

TEST_CASE("an elastic job gives GPUs back to a waiting gang, then grows again: the hand-computed end", "[elastic]") {
  // t = 0: the job alone takes all 4 GPUs (100 GPU-s: 25 s at 4 GPUs).
  // t = 10: a 2-GPU gang arrives and cannot be placed. The job has done 10/25 = 0.4 of its work; it
  //   shrinks to 2 GPUs (its first two) and restarts: 2 s + 0.6 x 50 s. The gang runs on the other two, 10 to 20.
  // t = 20: the gang ends. The job has computed 20 - 10 - 2 = 8 s of 50 (0.16; 0.56 in all); it grows back
  //   to 4 and restarts: 2 s + 0.44 x 25 s = 13 s. It ends at 33 s, after 2 resizes.
  const Scenario sc = elastic_node(kGang2, kGangAt10, kElastic);
  const RunResult run = simulate(sc, {.record_link_samples = true});
  const TaskRecord& job = task_of(sc, run, "train");
  const TaskRecord& gang = task_of(sc, run, "other");
  REQUIRE(job.status == TaskStatus::completed);
  CHECK(gang.start_s == Approx(10.0));
  CHECK(gang.end_s == Approx(20.0));
  CHECK(job.end_s == Approx(33.0));
  CHECK(job.gpu_count == 4);
  REQUIRE(run.trace.left_gangs.size() == 2);
  CHECK(run.trace.left_gangs[0].gpu_count == 4);
  CHECK(run.trace.left_gangs[1].gpu_count == 2);
  CHECK(run.trace.left_gangs[1].start_s == Approx(10.0));
  CHECK(run.trace.left_gangs[1].end_s == Approx(20.0));
  CHECK(run.summary.resizes == 2);
  CHECK(run.summary.restart_gpu_s == Approx(2.0 * 2 + 2.0 * 4));
  bool shrank = false;
  for (const Decision& d : run.trace.decisions) {
    if (d.kind == DecisionKind::resized && d.gpu_count == 2) {
      shrank = true;
      CHECK(d.time_s == Approx(10.0));
      CHECK_THAT(run.trace.reasons[d.reason], Catch::StartsWith("shrank from 4 to 2 GPUs: gave GPUs back for waiting task \"g\""));
    }
  }
  CHECK(shrank);
}

TEST_CASE("an elastic job is not resized within its minimum interval", "[elastic]") {
  // min_interval 15 s. t = 10: the gang arrives, but the job started at 0 may not shrink before 15.
  // t = 15: it has done 15/25 = 0.6; it shrinks to 2 GPUs: 2 s + 0.4 x 50 s = 22 s. The gang runs 15 to 25.
  // t = 25: the gang ends, but the job resized at 15 may not grow before 30.
  // t = 30: it has computed 30 - 15 - 2 = 13 s of 50 (0.26; 0.86 in all); it grows to 4: 2 s + 0.14 x 25 s = 5.5 s.
  // It ends at 35.5 s.
  const Scenario sc = elastic_node(kGang2, kGangAt10, R"({"min_gpus": 1, "restart": "2 s", "min_interval": "15 s"})");
  const RunResult run = simulate(sc);
  CHECK(run.summary.resizes == 2);
  CHECK(task_of(sc, run, "other").start_s == Approx(15.0));
  CHECK(task_of(sc, run, "other").end_s == Approx(25.0));
  CHECK(task_of(sc, run, "train").resized_s == Approx(30.0));
  CHECK(task_of(sc, run, "train").end_s == Approx(35.5));
  for (const LeftGang& left : run.trace.left_gangs) CHECK(left.end_s - left.start_s >= 15.0 - 1e-9);
}

TEST_CASE("malformed elastic specs are refused with the field named", "[elastic]") {
  const auto error = [](const std::string& task) {
    try {
      test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
          "workflows": {"w": {"tasks": [)" + task + R"(]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string work = R"("name": "t", "work": {"flop": "1 TFLOP"})";
  CHECK(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 2, "restart": "30 s"}})").empty());
  CHECK_THAT(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 5, "restart": "30 s"}})"),
             Catch::Contains("/workflows/w/tasks/0/elastic/min_gpus") && Catch::Contains("at most the task's \"gpus\" (4"));
  CHECK_THAT(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 0, "restart": "30 s"}})"),
             Catch::Contains("/workflows/w/tasks/0/elastic/min_gpus"));
  CHECK_THAT(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 2, "restart": "-1 s"}})"),
             Catch::Contains("/workflows/w/tasks/0/elastic/restart") && Catch::Contains("negative"));
  CHECK_THAT(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 2}})"), Catch::Contains("/workflows/w/tasks/0/elastic/restart"));
  CHECK_THAT(error("{" + work + R"(, "gpus": 4, "elastic": {"min_gpus": 2, "restart": "1 s", "grow": true}})"),
             Catch::Contains("/workflows/w/tasks/0/elastic/grow"));
  CHECK_THAT(error("{" + work + R"(, "batching": {"max_size": 4}, "elastic": {"min_gpus": 1, "restart": "1 s"}})"),
             Catch::Contains("/workflows/w/tasks/0/elastic") && Catch::Contains("batched task cannot be elastic"));
}

TEST_CASE("an elastic job keeps its GPUs when the waiting task would wait less than its restart", "[elastic]") {
  // With a 20-s restart: at 10 s the gang would have the job's GPUs at 25 s, 15 s away, less than
  // the restart, so the job does not shrink; the gang runs 25 to 35 s.
  const Scenario sc = elastic_node(kGang2, kGangAt10, R"({"min_gpus": 1, "restart": "20 s", "min_interval": "5 s"})");
  const RunResult run = simulate(sc);
  CHECK(run.summary.resizes == 0);
  CHECK(task_of(sc, run, "other").start_s == Approx(25.0));
}

TEST_CASE("elastic training with random failures over 200 seeds: invariants, the minimum interval, determinism", "[elastic][faults][property]") {
  // The elastic training scenario with a GPU failing every 2 h and a node every 12 h on average (a run
  // lasts 6 h), three attempts per task and checkpoints; the invariants are checked inside simulate().
  const std::vector<ScenarioEdit> edits{
      {"/faults", R"({"gpu": {"mtbf": "2 h", "mttr": "10 min"}, "node": {"mtbf": "12 h", "mttr": "30 min"},
                      "retry": {"max_attempts": 3, "backoff": "1 min"}, "checkpoint": {"interval": "5 min", "restore": "1 min"}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/elastic-training.json", edits);
  double min_interval_s = 0;
  for (const Workflow& wf : sc.workflows) {
    if (wf.id == "train-7b") min_interval_s = wf.tasks[0].elastic->min_interval_s;
  }
  REQUIRE(min_interval_s == Approx(600.0));
  std::uint64_t resizes = 0, stopped = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    INFO("seed " << seed);
    const RunResult run = simulate(sc, {.seed = seed});
    const Summary& s = run.summary;
    REQUIRE(s.tasks.completed + s.tasks.failed + s.tasks.running + s.tasks.queued == s.tasks.submitted);
    REQUIRE(s.goodput <= 1);
    for (const LeftGang& left : run.trace.left_gangs) {
      if (!left.stopped) REQUIRE(left.end_s - left.start_s >= min_interval_s - 1e-6);  // a stop is not a resize
    }
    resizes += s.resizes;
    stopped += s.tasks_stopped;
    if (seed % 50 == 0) REQUIRE(summary_json(s) == summary_json(simulate(sc, {.seed = seed}).summary));
  }
  CHECK(resizes > 0);
  CHECK(stopped > 0);
}

TEST_CASE("an elastic run is the same twice, resizes and decisions included", "[elastic]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/elastic-training.json");
  const RunResult a = simulate(sc, {.record_link_samples = true});
  const RunResult b = simulate(sc, {.record_link_samples = true});
  REQUIRE(a.summary.resizes > 0);
  CHECK(summary_json(a.summary) == summary_json(b.summary));
  REQUIRE(a.trace.decisions.size() == b.trace.decisions.size());
  for (std::size_t i = 0; i < a.trace.decisions.size(); ++i) {
    const Decision &x = a.trace.decisions[i], &y = b.trace.decisions[i];
    REQUIRE((x.time_s == y.time_s && x.kind == y.kind && x.task == y.task && x.gpu_count == y.gpu_count &&
             a.trace.reasons[x.reason] == b.trace.reasons[y.reason]));
  }
  REQUIRE(a.trace.left_gangs.size() == b.trace.left_gangs.size());
  for (std::size_t i = 0; i < a.trace.left_gangs.size(); ++i) {
    CHECK(a.trace.left_gangs[i].end_s == b.trace.left_gangs[i].end_s);
    CHECK(std::equal(a.trace.gpus.begin() + a.trace.left_gangs[i].gpu_begin,
                     a.trace.gpus.begin() + a.trace.left_gangs[i].gpu_begin + a.trace.left_gangs[i].gpu_count,
                     b.trace.gpus.begin() + b.trace.left_gangs[i].gpu_begin));
  }
}

TEST_CASE("a resize uses no retry attempt: a failure after one is retried", "[elastic][faults]") {
  // As in the growth case, the job grows to 4 GPUs at 10 s, with 0.1 of its work kept. At 20 s GPU n0.g0
  // fails for 100 s. With two attempts, the failure leaves one: the job is ready again after the 1-s
  // backoff and, with three GPUs free, runs on them from 21 s: 0.9 x 100/3 s = 30 s (no checkpoint
  // interval, so only the work kept at the resize counts; restoring costs nothing). It ends at 51 s.
  Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"other": )" + kGang3 + R"(,
                    "train": {"tasks": [{"name": "t", "gpus": 4, "work": {"flop": "10000 TFLOP"}, "elastic": )" + kElastic + R"(}]}},
      "workload": )" + kBothAtZero + R"(,
      "faults": {"events": [{"at": "20 s", "gpu": "n0.g0", "for": "100 s"}], "retry": {"max_attempts": 2, "backoff": "1 s"}})");
  const RunResult run = simulate(sc);
  const TaskRecord& job = task_of(sc, run, "train");
  REQUIRE(job.status == TaskStatus::completed);
  CHECK(run.summary.resizes == 1);
  CHECK(run.summary.tasks_stopped == 1);
  CHECK(run.summary.retries == 1);
  CHECK(job.start_s == Approx(21.0));
  CHECK(job.gpu_count == 3);
  CHECK(job.end_s == Approx(51.0));
}

TEST_CASE("an elastic task on time-sliced GPUs is not resized", "[elastic]") {
  // The growth case on a node whose GPUs each take two tasks: the job computes on a time-sliced GPU,
  // so it keeps the gang it was placed on and still ends, with every invariant kept.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1, "time_slicing": {"tasks": 2}}]},
      "workflows": {"other": )" + kGang3 + R"(,
                    "train": {"tasks": [{"name": "t", "gpus": 4, "work": {"flop": "10000 TFLOP"}, "elastic": )" + kElastic + R"(}]}},
      "workload": )" + kBothAtZero);
  const RunResult run = simulate(sc);
  CHECK(run.summary.resizes == 0);
  CHECK(task_of(sc, run, "train").status == TaskStatus::completed);
}

TEST_CASE("a resized task's gangs follow one another on the Perfetto tracks, with no extra lanes", "[elastic][report]") {
  const Scenario sc = elastic_node(kGang3, kBothAtZero, kElastic);
  const RunResult run = simulate(sc);
  REQUIRE(run.summary.resizes == 1);
  std::ostringstream text;
  write_perfetto_json(text, sc, run);
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  std::map<std::int64_t, std::vector<std::pair<double, double>>> slices;  // per thread
  int threads = 0, before_resize = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++threads;
    if (e.at("ph") != "X" || e.at("pid") != 0) continue;  // GPU tracks only (node 0)
    slices[e.at("tid").get<std::int64_t>()].emplace_back(e.at("ts").get<double>(), e.at("ts").get<double>() + e.at("dur").get<double>());
    before_resize += e.at("name").get<std::string>().ends_with("until resized");
  }
  CHECK(threads == 4);        // one lane per GPU: the gangs never overlap
  CHECK(before_resize == 1);  // the 1-GPU gang, 0 to 10 s
  for (auto& [tid, s] : slices) {
    std::sort(s.begin(), s.end());
    for (std::size_t i = 1; i < s.size(); ++i) {
      INFO("thread " << tid);
      CHECK((s[i].first >= s[i - 1].second - 1e-6 || s[i].second <= s[i - 1].second + 1e-6));
    }
  }
}
