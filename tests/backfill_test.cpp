// Backfilling against cases whose outcome follows from the rules: EASY starts a later job now if it
// ends before the blocked head's reservation or uses only GPUs the head will not need, and never
// delays the head; conservative backfilling gives every waiting job a reservation, so a later job
// delays none of them (where EASY may delay the second in line); overestimates backfill less.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using fleetsim::test::scenario_error;
using fleetsim::test::unit_scenario;

namespace {

// Jobs "submit,gpus,duration" on `nodes` four-GPU unit nodes under `policy`.
RunResult replay(const std::string& policy, int nodes, const std::string& rows) {
  // A file of its own: test cases run in parallel processes.
  static int calls = 0;
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("fleetsim-backfill-" + std::to_string(getpid()) + "-" + std::to_string(++calls) + ".csv");
  std::ofstream(file) << "submit_time,gpus,duration\n" << rows;
  struct Remove {
    std::filesystem::path file;
    ~Remove() { std::filesystem::remove(file); }
  } remove{file};
  return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": )" + std::to_string(nodes) +
                                R"(}]}, "workload": [{"trace": ")" + file.string() + R"("}], "policy": )" + policy));
}

// When the job submitted at `submit_s` started (its end less its duration).
double start_of(const RunResult& run, double submit_s, double duration_s) {
  for (const InstanceRecord& i : run.trace.instances) {
    if (i.arrival_s == submit_s) return i.end_s - duration_s;
  }
  FAIL("no job submitted at " << submit_s);
  return 0;
}

const std::string kEasy = R"({"name": "gang-backfill"})";
const std::string kConservative = R"({"name": "conservative-backfill"})";

}  // namespace

TEST_CASE("easy backfills a job that ends before the head's reservation and never delays the head", "[policy][backfill]") {
  // 8 GPUs. A (6 GPUs, 100 s) runs; the head B (8 GPUs) waits for it: reserved at 100. C (2 GPUs,
  // 50 s) ends before 100: it starts at once. D (2 GPUs, 200 s) would hold GPUs B needs at 100: it
  // waits for B (100-150).
  const std::string rows = "0,6,100\n1,8,50\n2,2,50\n3,2,200\n";
  const RunResult easy = replay(kEasy, 2, rows);
  CHECK(start_of(easy, 1, 50) == Approx(100));
  CHECK(start_of(easy, 2, 50) == Approx(2));
  CHECK(start_of(easy, 3, 200) == Approx(150));
  const RunResult fifo = replay(R"({"name": "fifo"})", 2, rows);
  CHECK(start_of(fifo, 2, 50) == Approx(150));
}

TEST_CASE("easy backfills a long job onto GPUs the head will not need", "[policy][backfill]") {
  // 16 GPUs. A (12 GPUs, 100 s) runs; the head B (8 GPUs) is reserved at 100, when 16 are free: 8 to
  // spare. D (2 GPUs, 500 s) outlasts the reservation but fits in the spare GPUs: it starts at once,
  // and B still starts at 100. E (8 GPUs) waits: at 100 only 6 are left beside B and D.
  const RunResult easy = replay(kEasy, 4, "0,12,100\n1,8,50\n2,2,500\n3,8,500\n");
  CHECK(start_of(easy, 2, 500) == Approx(2));
  CHECK(start_of(easy, 1, 50) == Approx(100));
  CHECK(start_of(easy, 3, 500) == Approx(150));
}

TEST_CASE("conservative backfilling delays no waiting job, where easy delays the second in line", "[policy][backfill]") {
  // 8 GPUs. A (6 GPUs, 100 s) runs. B (4 GPUs, 10 s) is reserved at 100-110; C (8 GPUs, 10 s) could
  // start at 110. D (2 GPUs, 1000 s) fits now and beside B. EASY starts it (only B is protected), and
  // C waits for D: 1003. Conservative gives C its slot at 110-120, so D waits for 120.
  const std::string rows = "0,6,100\n1,4,10\n2,8,10\n3,2,1000\n";
  const RunResult easy = replay(kEasy, 2, rows);
  CHECK(start_of(easy, 1, 10) == Approx(100));
  CHECK(start_of(easy, 3, 1000) == Approx(3));
  CHECK(start_of(easy, 2, 10) == Approx(1003));
  const RunResult conservative = replay(kConservative, 2, rows);
  CHECK(start_of(conservative, 1, 10) == Approx(100));
  CHECK(start_of(conservative, 2, 10) == Approx(110));
  CHECK(start_of(conservative, 3, 1000) == Approx(120));
}

TEST_CASE("conservative backfilling looks only `depth` jobs deep", "[policy][backfill]") {
  // The first case: C ends before the head's reservation, but one job deep only the head is looked at.
  const std::string rows = "0,6,100\n1,8,50\n2,2,50\n";
  CHECK(start_of(replay(kConservative, 2, rows), 2, 50) == Approx(2));
  const RunResult shallow = replay(R"({"name": "conservative-backfill", "params": {"depth": 1}})", 2, rows);
  CHECK(start_of(shallow, 2, 50) == Approx(150));
}

TEST_CASE("backfilling over overestimated run times draws each estimate within its bounds, the same every run", "[policy][backfill]") {
  // The first case with estimates up to 1.5 times the run time: the head's reservation moves to
  // 100-150 (A's estimate), C's estimate (50-75 s) still ends before it, D's (200-300 s) never does.
  const std::string rows = "0,6,100\n1,8,50\n2,2,50\n3,2,200\n";
  const std::string policy = R"({"name": "gang-backfill", "params": {"overestimate": 1.5}})";
  const RunResult over = replay(policy, 2, rows);
  CHECK(start_of(over, 2, 50) == Approx(2));
  CHECK(start_of(over, 1, 50) == Approx(100));
  CHECK(start_of(over, 3, 200) == Approx(150));
  CHECK(replay(policy, 2, rows).event_digest == over.event_digest);
  // Estimates 100 times too long, on a hundred random jobs: a different schedule, and again the same twice.
  std::string many;
  for (int j = 0; j < 100; ++j) many += std::to_string(j * 7) + "," + std::to_string(1 << (j % 3)) + "," + std::to_string(20 + (j * 37) % 200) + "\n";
  const std::string far = R"({"name": "gang-backfill", "params": {"overestimate": 100}})";
  CHECK(replay(far, 1, many).event_digest == replay(far, 1, many).event_digest);
  CHECK(replay(far, 1, many).event_digest != replay(kEasy, 1, many).event_digest);
}

TEST_CASE("backfilling parameters out of range are named", "[policy][backfill]") {
  const std::string body = R"({"name": "unit", "catalog": ["unit-catalog.json"], "cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
    "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
    "workload": [{"workflow": "w"}], "policy": )";
  CHECK_THAT(scenario_error(body + R"({"name": "gang-backfill", "params": {"overestimate": 0.5}}})"),
             Catch::Contains("/policy/params/overestimate") && Catch::Contains("at least 1"));
  CHECK_THAT(scenario_error(body + R"({"name": "conservative-backfill", "params": {"depth": 0}}})"),
             Catch::Contains("/policy/params/depth") && Catch::Contains("at least 1"));
}

TEST_CASE("greedy orders start what fits behind a gang that does not fit", "[policy][backfill]") {
  // 4 GPUs. A (1 GPU, 100 s) runs. B (4 GPUs, 10 s) comes at 1 and cannot fit while anything runs; it leads the
  // order under ftf (it has waited longest for its length), drf (one tenant: it joined first) and sjf (the shortest
  // but for E), not under critical-path (the longest first). C (1 GPU) at 2 and D (2 GPUs) at 3 fit beside A: each
  // starts as it comes, past B where B leads (a round takes, of the gangs that fit, the first in its order). E
  // (1 GPU) at 4 finds no GPU left and starts at 100, when A ends. B starts when C and D have ended, at 1,003. One
  // case for each way a round draws its order: keys made each round (ftf), kept per tenant (drf), kept (sjf,
  // critical-path).
  for (const char* policy : {R"({"name": "ftf"})", R"({"name": "drf"})", R"({"name": "sjf"})", R"({"name": "critical-path"})"}) {
    INFO(policy);
    const RunResult run = replay(policy, 1, "0,1,100\n1,4,10\n2,1,1000\n3,2,1000\n4,1,5\n");
    CHECK(start_of(run, 0, 100) == Approx(0));
    CHECK(start_of(run, 2, 1000) == Approx(2));
    CHECK(start_of(run, 3, 1000) == Approx(3));
    CHECK(start_of(run, 4, 5) == Approx(100));
    CHECK(start_of(run, 1, 10) == Approx(1003));
  }
}
