// The preemptive policies of the cluster-trace papers against cases whose outcome follows from their
// rules. Tiresias: discretized LAS suspends a long job for short ones and beats FIFO on mean completion
// time; Gittins orders a queue by the chance of finishing soon and so differs from LAS; starving jobs
// are promoted; a suspended job keeps its work and pays its restore. Gandiva's time slicing: jobs take
// turns a quantum at a time, only while others wait. SRTF suspends a job only for a shorter one. Bad
// parameters are named.
#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "fleetsim/compare.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using fleetsim::test::unit_scenario;

namespace {

// One unit GPU (100 TFLOP/s: 100 TFLOP take 1 s); `jobs` are workflows and their arrival times.
Scenario one_gpu(const std::string& policy, const std::string& workflows, const std::string& workload) {
  return unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]}, "workflows": {)" + workflows +
                       R"(}, "workload": [)" + workload + R"(], "policy": )" + policy);
}

std::string job(const std::string& name, int seconds) {
  return "\"" + name + R"(": {"tasks": [{"name": ")" + name + R"(", "work": {"flop": ")" + std::to_string(seconds * 100) + R"( TFLOP"}}]})";
}

std::string arrivals(const std::string& name, const std::string& times) {
  return R"({"workflow": ")" + name + R"(", "arrival": {"process": "times", "times": [)" + times + "]}}";
}

double end_of(const RunResult& run, std::size_t instance) { return run.trace.instances.at(instance).end_s; }

// The load error of a one-task scenario run under `policy` with these parameters ("" when it loads).
std::string policy_error(const std::string& policy, const std::string& params) {
  return test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"], "cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "times", "times": ["0 s"]}}],
      "policy": {"name": ")" + policy + R"(", "params": )" + params + "}}");
}

double mean_jct(const RunResult& run) {
  double sum = 0;
  for (const InstanceRecord& i : run.trace.instances) sum += i.end_s - i.arrival_s;
  return sum / static_cast<double>(run.trace.instances.size());
}

}  // namespace

TEST_CASE("las suspends a long job that passed its queue's threshold and beats fifo on mean completion time", "[policy][tiresias]") {
  // L (10 s) at 0, S1 and S2 (1 s) at 1 s and 2 s. FIFO: L ends at 10, S1 at 11, S2 at 12. LAS with
  // one threshold at 3 GPU-seconds: L moves to queue 1 at 3 s and is suspended for S1 (3-4) and S2
  // (4-5); it resumes with its 3 s kept and ends at 12 (12.5 with a 0.5-s restore).
  const std::string workflows = job("long", 10) + ", " + job("short", 1);
  const std::string workload = arrivals("long", R"("0 s")") + ", " + arrivals("short", R"("1 s", "2 s")");
  const RunResult fifo = simulate(one_gpu(R"({"name": "fifo"})", workflows, workload));
  const RunResult las = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "3"}})", workflows, workload));
  const RunResult restoring = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "3", "restore": 0.5}})", workflows, workload));

  CHECK(end_of(fifo, 0) == Approx(10));
  CHECK(end_of(fifo, 2) == Approx(12));
  CHECK(end_of(las, 1) == Approx(4));
  CHECK(end_of(las, 2) == Approx(5));
  CHECK(end_of(las, 0) == Approx(12));
  CHECK(end_of(restoring, 0) == Approx(12.5));
  CHECK(las.summary.tasks_preempted == 1);
  CHECK(las.summary.lost_gpu_s == Approx(0));
  CHECK(mean_jct(las) == Approx((12.0 + 3 + 3) / 3));
  CHECK(mean_jct(fifo) == Approx(10));

  // Without preemption the long job keeps its GPU: LAS's order alone cannot help here.
  const RunResult held = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "3", "preempt": false}})", workflows, workload));
  CHECK(end_of(held, 0) == Approx(10));
  CHECK(held.summary.tasks_preempted == 0);
}

TEST_CASE("gittins suspends a job unlikely to finish soon, where las keeps it", "[policy][tiresias]") {
  // A (4 s) at 0, B (1 s) at 1 s; job sizes {1, 4} GPU-seconds; one queue. At 1 s B, with nothing
  // received, finishes within a 1-GPU-second quantum with probability 1/2: index 1/2 / E[min(S, 1)] =
  // 0.5. A has received 1 and can only be the 4-s job: it cannot finish within the quantum, index 0.
  // Gittins suspends A for B (B ends at 2, A at 5); LAS keeps a running job ahead within its queue
  // (A ends at 4, B at 5).
  const std::string workflows = job("a", 4) + ", " + job("b", 1);
  const std::string workload = arrivals("a", R"("0 s")") + ", " + arrivals("b", R"("1 s")");
  const RunResult gittins = simulate(one_gpu(R"({"name": "gittins", "params": {"thresholds": "1000", "quantum": 1}})", workflows, workload));
  const RunResult las = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "1000"}})", workflows, workload));
  CHECK(end_of(gittins, 1) == Approx(2));
  CHECK(end_of(gittins, 0) == Approx(5));
  CHECK(end_of(las, 0) == Approx(4));
  CHECK(end_of(las, 1) == Approx(5));
}

TEST_CASE("gittins ranks by a history of job sizes when given one", "[policy][tiresias]") {
  // The case above, with the index over a past where every job took 10 GPU-seconds
  // (tests/data/gittins-sizes.csv, named relative to the scenario): no job finishes within a
  // 1-GPU-second quantum, so both indices are 0 and the earlier job, A, keeps its GPU as under LAS.
  const std::string workflows = job("a", 4) + ", " + job("b", 1);
  const std::string workload = arrivals("a", R"("0 s")") + ", " + arrivals("b", R"("1 s")");
  const RunResult past = simulate(one_gpu(R"({"name": "gittins", "params": {"thresholds": "1000", "quantum": 1, "sizes": "gittins-sizes.csv"}})", workflows, workload));
  CHECK(end_of(past, 0) == Approx(4));
  CHECK(end_of(past, 1) == Approx(5));
  CHECK(past.summary.tasks_preempted == 0);

  const std::filesystem::path bad = std::filesystem::temp_directory_path() / "fleetsim-gittins-sizes.csv";
  std::ofstream(bad) << "gput\n120\nlots\n";
  CHECK_THAT(policy_error("gittins", R"({"sizes": ")" + bad.string() + R"("})"),
             Catch::Contains("/policy/params/sizes") && Catch::Contains("line 3: expected a positive number of GPU-seconds, found \"lots\""));
  std::ofstream(bad) << "gput\n";
  CHECK_THAT(policy_error("gittins", R"({"sizes": ")" + bad.string() + R"("})"), Catch::Contains("found none"));
  std::filesystem::remove(bad);
  CHECK_THAT(policy_error("gittins", R"({"sizes": "no-such-sizes.csv"})"), Catch::Contains("/policy/params/sizes") && Catch::Contains("no-such-sizes.csv"));
  CHECK_THAT(policy_error("gittins", R"({"sizes": 5})"), Catch::Contains("expected a file path"));
}

TEST_CASE("a starving job goes back to the end of the first queue", "[policy][tiresias]") {
  // L (10 s) at 0, then a 1-s job every second from 1 s to 20 s. L passes the 2-GPU-second threshold
  // at 2 s and is suspended; the short jobs, always in queue 0, hold the GPU (each runs the second
  // after it arrives) until 22 s, when L runs its last 8 s. With starvation 1, L goes back to the end
  // of queue 0 once it has waited as long as it last ran (2 s): at 4 s it runs again (5-7), is
  // suspended at 7 s, promoted at 9 s, runs 12-14, promoted at 16 s, runs 21-23, promoted at 25 s
  // behind the last short jobs, and runs its last 2 s from 28 s.
  std::string times;
  for (int t = 1; t <= 20; ++t) times += (t > 1 ? ", " : "") + std::string("\"") + std::to_string(t) + " s\"";
  const std::string workflows = job("long", 10) + ", " + job("short", 1);
  const std::string workload = arrivals("long", R"("0 s")") + ", " + arrivals("short", times);
  const RunResult starving = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "2"}})", workflows, workload));
  const RunResult promoted = simulate(one_gpu(R"({"name": "las", "params": {"thresholds": "2", "starvation": 1}})", workflows, workload));
  CHECK(starving.summary.tasks_preempted == 1);
  CHECK(starving.trace.tasks[0].start_s == Approx(22));
  CHECK(end_of(starving, 0) == Approx(30));
  CHECK(promoted.summary.tasks_preempted == 4);
  CHECK(promoted.trace.tasks[0].start_s == Approx(28));
  CHECK(end_of(promoted, 0) == Approx(30));
}

TEST_CASE("a restore is not service: two starving jobs whose restore passes the first threshold still finish", "[policy][tiresias]") {
  // A (10 s) at 0, B (10 s) at 0.5 s on one GPU; threshold 1 GPU-second, starvation 0.5, restore 2 s. A passes
  // the threshold at 1 s and B suspends it; A waits 0.5 s (half its 1 GPU-second), goes back to queue 0 and
  // suspends B at 2 s, when B passes the threshold in turn. From then each resumed job pays its 2-s restore,
  // computes 1 s, passes the threshold and is suspended by the other, promoted 0.5 s after its own suspension:
  // A computes at 4-5, 10-11, ..., 52-53 (its 10th second: it ends at 53); B at 7-8, ..., 49-50, then alone
  // 53-55 restoring and 55-56 computing its last second. Counting the restore as service would demote a resumed
  // job 1 s into its restore, before it computed anything, and the two would take turns forever.
  const std::string workflows = job("a", 10) + ", " + job("b", 10);
  const std::string workload = arrivals("a", R"("0 s")") + ", " + arrivals("b", R"("0.5 s")");
  Scenario scenario = one_gpu(R"({"name": "las", "params": {"thresholds": "1", "starvation": 0.5, "restore": 2}})", workflows, workload);
  scenario.max_events = 100000;
  const RunResult run = simulate(scenario);
  CHECK(end_of(run, 0) == Approx(53));
  CHECK(end_of(run, 1) == Approx(56));
  CHECK(run.summary.tasks_preempted == 18);
}

TEST_CASE("a starving job's promotion comes at its due time whatever the rounding of the sum", "[policy][tiresias]") {
  // The case of "a starving job goes back to the end of the first queue" with its times scaled: the due time,
  // ready + starvation x service / GPUs, need not give the service back when the ready time is taken off it
  // again, and a promotion tested by that difference missed the wake-up asked for its due time (at 0.3, L was
  // last suspended at 24 x 0.3 s, not 23 x 0.3). Every time scales.
  const auto seconds = [](double s) {
    std::ostringstream out;
    out << std::setprecision(17) << s;
    return out.str();
  };
  for (const double scale : {0.3, 0.13}) {
    std::string times;
    for (int t = 1; t <= 20; ++t) times += (t > 1 ? ", " : "") + std::string("\"") + seconds(t * scale) + " s\"";
    const std::string workflows = R"("long": {"tasks": [{"name": "long", "work": {"flop": ")" + seconds(1000 * scale) +
                                  R"( TFLOP"}}]}, "short": {"tasks": [{"name": "short", "work": {"flop": ")" + seconds(100 * scale) + R"( TFLOP"}}]})";
    const std::string workload = arrivals("long", R"("0 s")") + ", " + arrivals("short", times);
    const RunResult promoted =
        simulate(one_gpu(R"({"name": "las", "params": {"thresholds": ")" + seconds(2 * scale) + R"(", "starvation": 1}})", workflows, workload));
    INFO("scale " << scale);
    CHECK(promoted.summary.tasks_preempted == 4);
    CHECK(promoted.trace.tasks[0].ready_s == Approx(23 * scale));  // its last suspension
    CHECK(promoted.trace.tasks[0].start_s == Approx(28 * scale));
    CHECK(end_of(promoted, 0) == Approx(30 * scale));
  }
}

TEST_CASE("a waiting task's queue follows the service its instance's other tasks received", "[policy][tiresias]") {
  // X: a (1 s), then b (3 s) and c (1 s) both after a; Y (1 s) at 2 s; threshold 3 GPU-seconds. a runs 0-1,
  // then b (first in the queue) while c waits. At 3 s X has had 3 GPU-seconds: b passes into queue 1 and is
  // suspended for Y, still in queue 0. c waits in queue 1 with its instance (1 GPU-second when it joined, 3
  // once b stopped), so Y runs 3-4, then c (in queue 1 since 1 s) 4-5 and b 5-6. Keyed once when it joined,
  // c would have run at 3 s, ahead of Y.
  const std::string workflows = R"("x": {"tasks": [{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "300 TFLOP"}},
      {"name": "c", "work": {"flop": "100 TFLOP"}}], "edges": [{"from": "a", "to": "b"}, {"from": "a", "to": "c"}]}, )" + job("y", 1);
  const std::string workload = arrivals("x", R"("0 s")") + ", " + arrivals("y", R"("2 s")");
  for (const char* name : {"las", "gittins"}) {
    INFO(name);
    const RunResult run = simulate(one_gpu(std::string(R"({"name": ")") + name + R"(", "params": {"thresholds": "3"}})", workflows, workload));
    const auto start_of = [&](std::uint32_t instance, std::uint32_t task) {  // its last start
      for (const TaskRecord& t : run.trace.tasks) {
        if (index(t.instance) == instance && t.task == task) return t.start_s;
      }
      return -1.0;
    };
    CHECK(start_of(1, 0) == Approx(3));  // y
    CHECK(start_of(0, 2) == Approx(4));  // c
    CHECK(start_of(0, 1) == Approx(5));  // b, resumed
    CHECK(end_of(run, 1) == Approx(4));
    CHECK(end_of(run, 0) == Approx(6));
    CHECK(run.summary.tasks_preempted == 1);
  }
}

TEST_CASE("on a heavy-tailed trace las and gittins differ from fifo and from each other", "[policy][tiresias][compare]") {
  // 300 jobs of 1-4 GPUs with Pareto (alpha 1.1) durations on 8 GPUs, arriving faster than FIFO
  // clears them. Preemptive LAS and Gittins both cut the mean completion time; their orders differ.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fleetsim-tiresias-test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir / "heavy.csv");
    csv << "submit_time,gpus,duration\n";
    std::mt19937_64 rng(7);
    double t = 0;
    for (int i = 0; i < 300; ++i) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      t += -std::log(1 - u) * 40;
      const double v = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      const double duration = std::min(30.0 / std::pow(1 - v, 1 / 1.1), 50000.0);
      csv << t << "," << (1u << (rng() % 3)) << "," << duration << "\n";
    }
  }
  const std::string json = R"({"name": "heavy", "catalog": [")" + test::data_dir() + R"(/unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "workload": [{"trace": "heavy.csv", "reference_gpu": "unit-gpu"}],
      "policy": {"name": "fifo"}})";
  const Scenario sc = parse_scenario(json, (dir / "heavy.json").string(), dir.string());
  const std::vector<PolicyRuns> results = compare_policies(sc, {"fifo", "las", "gittins", "time-slice", "srtf"}, 1, 1, {});
  REQUIRE(results.size() == 5);
  const auto mean_of = [&](std::size_t p) { return mean_jct(simulate(with_policy(sc, *find_policy(results[p].policy)))); };
  const double fifo = mean_of(0), las = mean_of(1), gittins = mean_of(2), sliced = mean_of(3), srtf = mean_of(4);
  INFO("mean JCT fifo " << fifo << " s, las " << las << " s, gittins " << gittins << " s, time-slice " << sliced << " s, srtf " << srtf << " s");
  CHECK(las < 0.8 * fifo);
  CHECK(gittins < 0.8 * fifo);
  CHECK(std::abs(las - gittins) > 1e-3 * fifo);
  // Taking turns lets short jobs through the long ones' slices: processor sharing beats FIFO on heavy tails.
  CHECK(sliced < 0.8 * fifo);
  // Knowing every job's time, SRTF is the best of them on the mean (optimal on one server, Schrage 1968).
  CHECK(srtf < std::min({las, gittins, sliced}));
  for (std::size_t p = 1; p < results.size(); ++p) CHECK(results[p].runs.front().tasks_preempted > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tiresias parameters that no type rules out are named at load", "[policy][tiresias][input]") {
  const auto error = [](const std::string& params) { return policy_error("gittins", params); };
  CHECK(error(R"({"thresholds": "3250, 7200", "quantum": 100})").empty());
  CHECK_THAT(error(R"({"thresholds": "7200, 3250"})"), Catch::Contains("/policy/params/thresholds") && Catch::Contains("increasing positive GPU-seconds"));
  CHECK_THAT(error(R"({"thresholds": "a lot"})"), Catch::Contains("found \"a lot\""));
  CHECK_THAT(error(R"({"restore": -1})"), Catch::Contains("/policy/params/restore") && Catch::Contains("from 0 to 1e9"));
  CHECK_THAT(error(R"({"quantum": -5})"), Catch::Contains("/policy/params/quantum"));
}

TEST_CASE("time-slice lets a short job through a long one's slice", "[policy][time-slice]") {
  // L (1000 s) at 0, S (10 s) at 1 s, one GPU, 30-s quantum. S waits out L's first slice, runs 30-40,
  // and L resumes with its 30 s kept: ends at 1010 (1012 with a 2-s restore). FIFO ends S at 1010.
  const std::string workflows = job("long", 1000) + ", " + job("short", 10);
  const std::string workload = arrivals("long", R"("0 s")") + ", " + arrivals("short", R"("1 s")");
  const RunResult fifo = simulate(one_gpu(R"({"name": "fifo"})", workflows, workload));
  const RunResult sliced = simulate(one_gpu(R"({"name": "time-slice", "params": {"quantum": 30}})", workflows, workload));
  const RunResult restoring = simulate(one_gpu(R"({"name": "time-slice", "params": {"quantum": 30, "restore": 2}})", workflows, workload));
  CHECK(end_of(fifo, 1) == Approx(1010));
  CHECK(sliced.trace.tasks[1].start_s == Approx(30));
  CHECK(end_of(sliced, 1) == Approx(40));
  CHECK(end_of(sliced, 0) == Approx(1010));
  CHECK(sliced.summary.tasks_preempted == 1);
  CHECK(sliced.summary.lost_gpu_s == Approx(0));
  CHECK(end_of(restoring, 1) == Approx(40));
  CHECK(end_of(restoring, 0) == Approx(1012));
}

TEST_CASE("time-slice alternates equal jobs a quantum at a time and leaves a lone job alone", "[policy][time-slice]") {
  // A and B (100 s each) at 0 and 10 s, 30-s quantum: A 0-30, B 30-60, A 60-90, B 90-120, A 120-150,
  // B 150-180, A 180-190 (done), B 190-200 (done). Worked by hand from the rule: a job that has run a
  // whole slice queues at its end, behind the job waiting since before then.
  const std::string workflows = job("a", 100) + ", " + job("b", 100);
  const RunResult pair = simulate(one_gpu(R"({"name": "time-slice", "params": {"quantum": 30}})", workflows,
                                          arrivals("a", R"("0 s")") + ", " + arrivals("b", R"("10 s")")));
  CHECK(end_of(pair, 0) == Approx(190));
  CHECK(end_of(pair, 1) == Approx(200));
  CHECK(pair.summary.tasks_preempted == 6);  // A at 30, 90, 150; B at 60, 120, 180
  // Alone, a job is never suspended, however many slices it runs.
  const RunResult alone = simulate(one_gpu(R"({"name": "time-slice", "params": {"quantum": 7}})", job("a", 100), arrivals("a", R"("0 s")")));
  CHECK(end_of(alone, 0) == Approx(100));
  CHECK(alone.summary.tasks_preempted == 0);
}

TEST_CASE("time-slice counts a slice from the end of the restore, so a restore longer than the quantum still lets jobs finish", "[policy][time-slice]") {
  // A and B (3 s each) at 0 on one GPU, 1-s quantum, 2-s restore. A 0-1; B 1-2 (a first run pays no restore);
  // A restores 2-4 and computes 4-5; B restores 5-7, computes 7-8; A 8-10 and 10-11 (done, 3 s computed);
  // B alone 11-13 and 13-14 (done). Were the restore in the slice, every resumed job's slice would end
  // while it restored and the two would take turns forever.
  const std::string workflows = job("a", 3) + ", " + job("b", 3);
  const std::string workload = arrivals("a", R"("0 s")") + ", " + arrivals("b", R"("0 s")");
  Scenario scenario = one_gpu(R"({"name": "time-slice", "params": {"quantum": 1, "restore": 2}})", workflows, workload);
  scenario.max_events = 10000;
  const RunResult run = simulate(scenario);
  CHECK(end_of(run, 0) == Approx(11));
  CHECK(end_of(run, 1) == Approx(14));
  CHECK(run.summary.tasks_preempted == 4);  // A at 1 and 5, B at 2 and 8
}

TEST_CASE("time-slice keeps the GPUs a waiting gang has counted for it", "[policy][time-slice]") {
  // Two unit GPUs, 30-s quantum. A and B (1 GPU, 1000 s) start at 0 and 15 s; C (2 GPUs, 20 s) arrives at
  // 16 s, then 1-GPU jobs of 10 s every 5 s from 17 s. At 30 s A's slice ends: C is first in the queue
  // but one GPU is not enough, so it holds its turn: the small jobs behind it wait, and A, behind it too,
  // runs on. At 45 s B's slice ends: C counts both GPUs and runs 45-65 s. Without holding its turn each
  // GPU a slice end frees would go to a small job behind C, for as long as they kept coming.
  const std::string workflows = job("a", 1000) + ", " + job("small", 10) +
                                R"(, "gang": {"tasks": [{"name": "gang", "gpus": 2, "work": {"flop": "4000 TFLOP"}}]})";
  std::string smalls;
  for (int t = 17; t <= 297; t += 5) smalls += std::string(smalls.empty() ? "" : ", ") + "\"" + std::to_string(t) + " s\"";
  const RunResult run = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]}, "workflows": {)" + workflows +
                                               R"(}, "workload": [)" + arrivals("a", R"("0 s", "15 s")") + ", " + arrivals("gang", R"("16 s")") +
                                               ", " + arrivals("small", smalls) + R"(], "policy": {"name": "time-slice", "params": {"quantum": 30}})"));
  const auto gang = std::find_if(run.trace.instances.begin(), run.trace.instances.end(),
                                 [](const InstanceRecord& i) { return i.arrival_s == 16; });
  REQUIRE(gang != run.trace.instances.end());
  CHECK(gang->end_s == Approx(65));
  CHECK(run.summary.workflows.completed == run.trace.instances.size());
}

TEST_CASE("time-slice keeps no GPUs for a gang larger than the GPUs up", "[policy][time-slice]") {
  // Two unit GPUs, n0.g1 down from 1 s to 1001 s. A gang of 2 (20 s) at 2 s cannot run until the repair,
  // so it keeps nothing: 1-GPU jobs (10 s) at 3 s and 13 s run on n0.g0 at 3-13 s and 13-23 s.
  const std::string workflows = job("small", 10) + R"(, "gang": {"tasks": [{"name": "gang", "gpus": 2, "work": {"flop": "4000 TFLOP"}}]})";
  const RunResult run = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]}, "workflows": {)" + workflows +
                                               R"(}, "workload": [)" + arrivals("gang", R"("2 s")") + ", " + arrivals("small", R"("3 s", "13 s")") +
                                               R"(], "faults": {"events": [{"at": "1 s", "gpu": "n0.g1", "for": "1000 s"}]},
      "policy": {"name": "time-slice", "params": {"quantum": 30}})"));
  std::vector<double> small_ends;
  for (const InstanceRecord& i : run.trace.instances) {
    if (i.arrival_s != 2) small_ends.push_back(i.end_s);
  }
  CHECK_THAT(small_ends, Catch::Approx(std::vector<double>{13, 23}));
}

TEST_CASE("time-slice parameters out of range are named at load", "[policy][time-slice][input]") {
  const auto error = [](const std::string& params) { return policy_error("time-slice", params); };
  CHECK(error(R"({"quantum": 600, "restore": 5})").empty());
  CHECK_THAT(error(R"({"quantum": 0})"), Catch::Contains("/policy/params/quantum") && Catch::Contains("from 1 to 1e9"));
  CHECK_THAT(error(R"({"restore": -1})"), Catch::Contains("/policy/params/restore") && Catch::Contains("from 0 to 1e9"));
}

TEST_CASE("srtf suspends a running job only for one with less time left", "[policy][srtf]") {
  // L (10 s) at 0, S (2 s) at 1 s: L has 9 s left, S 2, so L is suspended; S ends at 3, L at 12.
  // M (5 s) at 6 s instead: L has 4 s left and keeps its GPU; L ends at 10, M at 15.
  const std::string workflows = job("long", 10) + ", " + job("short", 2) + ", " + job("middle", 5);
  const RunResult cut = simulate(one_gpu(R"({"name": "srtf"})", workflows, arrivals("long", R"("0 s")") + ", " + arrivals("short", R"("1 s")")));
  CHECK(end_of(cut, 1) == Approx(3));
  CHECK(end_of(cut, 0) == Approx(12));
  CHECK(cut.summary.tasks_preempted == 1);
  CHECK(cut.summary.lost_gpu_s == Approx(0));
  const RunResult kept = simulate(one_gpu(R"({"name": "srtf"})", workflows, arrivals("long", R"("0 s")") + ", " + arrivals("middle", R"("6 s")")));
  CHECK(end_of(kept, 0) == Approx(10));
  CHECK(end_of(kept, 1) == Approx(15));
  CHECK(kept.summary.tasks_preempted == 0);
}

TEST_CASE("srtf's waiting task takes the time left its workflow has once a sibling ends", "[policy][srtf]") {
  // X: a and b (2 s each, no edge between them) at 0, so X's time left is 4 s; Y (3 s) at 1.5 s. a runs 0-2 (at
  // 1.5 s it has 2.5 s left, under Y's 3). At 2 s a ends and X has 2 s left: b, waiting since 0, goes ahead of Y
  // (2-4), then Y (4-7). Had b kept the key it joined with (4 s), Y would have run 2-5 and b 5-7.
  const std::string workflows =
      R"("x": {"tasks": [{"name": "a", "work": {"flop": "200 TFLOP"}}, {"name": "b", "work": {"flop": "200 TFLOP"}}]}, )" + job("y", 3);
  const RunResult run = simulate(one_gpu(R"({"name": "srtf"})", workflows, arrivals("x", R"("0 s")") + ", " + arrivals("y", R"("1.5 s")")));
  CHECK(end_of(run, 0) == Approx(4));
  CHECK(end_of(run, 1) == Approx(7));
  CHECK(run.summary.tasks_preempted == 0);
}

TEST_CASE("preemptive policies with restores as long as their thresholds and quanta still finish every job", "[policy][time-slice][tiresias][srtf]") {
  // Random jobs (1-8 GPUs of two 4-GPU nodes, 0.1-20 s, arriving in the first 10 s) under each preemptive policy with
  // a restore of 2 or 5 s, a 1-s quantum and 1-GPU-second first threshold, starvation 0.5 or 1: were a restore
  // counted as service or inside a slice, a resumed job would lose its turn before computing anything, and some of
  // these runs would never end (before that rule, 19 of 200 such runs hit max_events).
  std::mt19937 random(7);
  const auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(random); };
  const std::array<std::string, 4> policies{R"({"name": "time-slice", "params": {"quantum": 1, "restore": R}})",
                                            R"({"name": "las", "params": {"thresholds": "1, 10", "starvation": S, "restore": R}})",
                                            R"({"name": "gittins", "params": {"thresholds": "1", "starvation": S, "restore": R}})",
                                            R"({"name": "srtf", "params": {"restore": R}})"};
  for (int run = 0; run < 40; ++run) {
    std::string workflows, workload;
    const int jobs = 2 + static_cast<int>(random() % 6);
    for (int j = 0; j < jobs; ++j) {
      const int gpus = 1 << (random() % 4);
      const std::string name = "j" + std::to_string(j);
      workflows += (j > 0 ? ", \"" : "\"") + name + R"(": {"tasks": [{"name": "t", "gpus": )" + std::to_string(gpus) + R"(, "work": {"flop": ")" +
                   std::to_string(uniform(0.1, 20) * 100 * gpus) + R"( TFLOP"}}]})";
      workload += (j > 0 ? ", " : "") + arrivals(name, "\"" + std::to_string(uniform(0, 10)) + " s\"");
    }
    std::string policy = policies[static_cast<std::size_t>(run) % policies.size()];
    policy.replace(policy.find('R'), 1, run % 3 == 0 ? "5" : "2");
    if (const std::size_t at = policy.find('S'); at != std::string::npos) policy.replace(at, 1, run % 2 == 0 ? "0.5" : "1");
    Scenario scenario = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]}, "workflows": {)" + workflows + R"(}, "workload": [)" +
                                      workload + R"(], "policy": )" + policy);
    scenario.max_events = 200000;
    INFO("run " << run << ": " << policy);
    std::uint64_t completed = 0, submitted = 1;
    REQUIRE_NOTHROW([&] {
      const RunResult result = simulate(scenario);
      completed = result.summary.tasks.completed;
      submitted = result.summary.tasks.submitted;
    }());
    CHECK(completed == submitted);
  }
}

TEST_CASE("the counting policies count each virtual cluster's own GPUs", "[policy][time-slice][tiresias][srtf]") {
  // Two tenants pinned to a 1-GPU node each (virtual clusters). In a's node, L (1000 s) at 0 and S
  // (10 s) at 1 s; b's node stays idle. Counted over the whole cluster, b's idle GPU would seem to
  // hold S and nobody would be suspended (S ends at 1010 s); counted per part, S runs in a's node.
  const std::string workflows = job("long", 1000) + ", " + job("short", 10);
  const auto run = [&](const std::string& policy) {
    return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
        "tenants": [{"name": "a", "nodes": ["n0"], "exclusive": true}, {"name": "b", "nodes": ["n1"], "exclusive": true}],
        "workflows": {)" + workflows + R"(},
        "workload": [{"workflow": "long", "tenant": "a", "arrival": {"process": "times", "times": ["0 s"]}},
                     {"workflow": "short", "tenant": "a", "arrival": {"process": "times", "times": ["1 s"]}}],
        "policy": )" + policy));
  };
  CHECK(end_of(run(R"({"name": "time-slice", "params": {"quantum": 30}})"), 1) == Approx(40));
  CHECK(end_of(run(R"({"name": "srtf"})"), 1) == Approx(11));
  CHECK(end_of(run(R"({"name": "las", "params": {"thresholds": "5"}})"), 1) == Approx(15));
  CHECK(end_of(run(R"({"name": "fifo"})"), 1) == Approx(1010));
}
