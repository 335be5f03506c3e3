// Queueing theory as an outside truth: Poisson arrivals of single tasks with exponential work on c
// GPUs is M/M/c, whose mean wait is Erlang C's; two non-preemptive priority classes on one GPU
// follow Cobham's formula. Simulated means are checked against the 99% confidence interval of
// batch means (20 batches after a warm-up), so the check can fail if the model is wrong.
#include <catch2/catch.hpp>
#include <cmath>

#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

struct Estimate {
  double mean, half_width;  // 99% confidence half-width from batch means
};

// Mean wait (start - arrival) of one tenant's instances, by batch means.
Estimate mean_wait(const RunResult& run, std::optional<std::uint32_t> tenant = std::nullopt) {
  std::vector<double> waits;
  for (const TaskRecord& t : run.trace.tasks) {
    if (tenant && index(t.tenant) != *tenant) continue;
    if (t.start_s != kNever) waits.push_back(t.start_s - run.trace.instances[index(t.instance)].arrival_s);
  }
  const std::size_t warmup = waits.size() / 50;
  constexpr std::size_t batches = 20;
  const std::size_t per_batch = (waits.size() - warmup) / batches;
  std::vector<double> means;
  for (std::size_t b = 0; b < batches; ++b) {
    double sum = 0;
    for (std::size_t i = 0; i < per_batch; ++i) sum += waits[warmup + b * per_batch + i];
    means.push_back(sum / static_cast<double>(per_batch));
  }
  double mean = 0;
  for (double m : means) mean += m;
  mean /= static_cast<double>(batches);
  double var = 0;
  for (double m : means) var += (m - mean) * (m - mean);
  var /= static_cast<double>(batches - 1);
  const double t99 = 2.861;  // Student t, 19 degrees of freedom, two-sided 99%
  return {mean, t99 * std::sqrt(var / static_cast<double>(batches))};
}

double erlang_c_wait(int c, double lambda, double mu) {
  const double a = lambda / mu;
  double sum = 0, term = 1;
  for (int k = 0; k < c; ++k) {
    if (k > 0) term *= a / k;
    sum += term;
  }
  const double top = term * a / c * c / (c - a);  // a^c / c! * c / (c - a)
  return top / (sum + top) / (c * mu - lambda);
}

Scenario queue(const std::string& policy, int gpus, const std::string& workload, const std::string& tenants = "") {
  return test::unit_scenario(R"("seed": 7, "policy": {"name": ")" + policy + R"("},
      "cluster": {"nodes": [{"type": "unit-node-1", "count": )" + std::to_string(gpus) + R"(}]},)" + tenants + R"(
      "workflows": {"job": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP", "size": "exponential"}}]}},
      "workload": )" + workload);
}

}  // namespace

TEST_CASE("M/M/c with FIFO: mean wait matches Erlang C", "[validation][queueing]") {
  // 2 GPUs, mean service 1 s (100 TFLOP at 100 TFLOP/s, exponential), utilizations 0.5, 0.8, 0.95.
  for (const auto& [rho, arrivals] : {std::pair{0.5, 100000}, std::pair{0.8, 200000}, std::pair{0.95, 2000000}}) {
    const double lambda = 2 * rho;
    const Scenario sc = queue("fifo", 2, R"([{"workflow": "job", "arrival": {"process": "poisson", "rate": ")" +
                                     std::to_string(lambda) + R"( /s", "count": )" + std::to_string(arrivals) + "}}]");
    const Estimate w = mean_wait(simulate(sc));
    const double expected = erlang_c_wait(2, lambda, 1.0);
    INFO("rho " << rho << ": simulated " << w.mean << " +- " << w.half_width << ", Erlang C " << expected);
    CHECK(std::abs(w.mean - expected) <= w.half_width);
    CHECK(w.half_width < 0.15 * expected);  // the interval is tight enough to mean something
  }
}

TEST_CASE("M/M/1 with two non-preemptive priority classes matches Cobham's formula", "[validation][queueing]") {
  // lambda_hi = 0.3, lambda_lo = 0.4, mu = 1: W0 = sum(lambda_i E[S^2] / 2) = 0.7;
  // W_hi = W0 / (1 - 0.3) = 1.0; W_lo = W0 / ((1 - 0.3)(1 - 0.7)) = 3.333.
  const Scenario sc = queue("priority", 1,
                            R"([{"tenant": "hi", "workflow": "job", "arrival": {"process": "poisson", "rate": "0.3 /s", "count": 150000}},
                                {"tenant": "lo", "workflow": "job", "arrival": {"process": "poisson", "rate": "0.4 /s", "count": 200000}}])",
                            R"( "tenants": [{"name": "hi", "priority": 1}, {"name": "lo", "priority": 0}],)");
  const auto run = simulate(sc);
  const Estimate hi = mean_wait(run, 0), lo = mean_wait(run, 1);
  INFO("hi " << hi.mean << " +- " << hi.half_width << "; lo " << lo.mean << " +- " << lo.half_width);
  CHECK(std::abs(hi.mean - 1.0) <= hi.half_width);
  CHECK(std::abs(lo.mean - 0.7 / (0.7 * 0.3)) <= lo.half_width);
}

TEST_CASE("bursty arrivals keep their long-run rate and are over-dispersed", "[workload]") {
  // On 1 s (10 /s), off 3 s (none): mean rate 10 x 1 / (1 + 3) = 2.5 /s.
  const Scenario sc = queue("fifo", 1, R"([{"workflow": "job", "arrival": {"process": "bursty", "rate": "10 /s", "on": "1 s", "off": "3 s", "count": 50000}}])");
  const auto run = simulate(sc);
  const auto& inst = run.trace.instances;
  const double span = inst.back().arrival_s - inst.front().arrival_s;
  CHECK(static_cast<double>(inst.size()) / span == Approx(2.5).epsilon(0.03));
  // Counts per 1-s window: a Poisson process has variance = mean; on/off bursts have far more.
  std::vector<double> counts(static_cast<std::size_t>(span) + 1, 0.0);
  for (const auto& i : inst) counts[static_cast<std::size_t>(i.arrival_s - inst.front().arrival_s)] += 1;
  double mean = 0, var = 0;
  for (double c : counts) mean += c;
  mean /= static_cast<double>(counts.size());
  for (double c : counts) var += (c - mean) * (c - mean);
  var /= static_cast<double>(counts.size() - 1);
  CHECK(var / mean > 3);
}

TEST_CASE("diurnal arrivals peak and trough as the cosine says", "[workload]") {
  // Mean 1 /s, amplitude 0.5, period 1000 s, peak at 0: the rate is 1.5 /s near the peaks and
  // 0.5 /s near the troughs; over whole periods the mean is 1 /s.
  const Scenario sc = queue("fifo", 64, R"([{"workflow": "job", "arrival": {"process": "diurnal", "rate": "1 /s", "amplitude": 0.5, "period": "1000 s", "count": 100000}}])");
  const auto run = simulate(sc);
  double near_peak = 0, near_trough = 0;
  for (const auto& i : run.trace.instances) {
    const double phase = std::fmod(i.arrival_s, 1000.0);
    if (phase < 50 || phase > 950) near_peak += 1;
    if (phase > 450 && phase < 550) near_trough += 1;
  }
  // Average of 1 + 0.5 cos over +-50 s around a peak is 1 + 0.5 x sin(0.1 pi)/(0.1 pi) = 1.492.
  const double avg_cos = std::sin(0.1 * M_PI) / (0.1 * M_PI);
  CHECK(near_peak / near_trough == Approx((1 + 0.5 * avg_cos) / (1 - 0.5 * avg_cos)).epsilon(0.05));
}

TEST_CASE("a closed loop obeys the interactive response time law", "[workload][validation]") {
  // N = 4 users, each: submit a 1-s job (exponential), wait, think 3 s (exponential), again. For any
  // closed system, throughput X = N / (R + Z), with R the mean response time and Z the mean think time.
  // One user a tenant, so that each user's workflows can be told apart in the trace.
  std::string users = "[", tenants = R"("tenants": [)";
  for (int u = 0; u < 4; ++u) {
    users += std::string(u > 0 ? ", " : "") + R"({"workflow": "job", "tenant": "u)" + std::to_string(u) +
             R"(", "arrival": {"process": "closed", "users": 1, "think": "3 s", "count": 20000}})";
    tenants += std::string(u > 0 ? ", " : "") + R"({"name": "u)" + std::to_string(u) + R"("})";
  }
  const Scenario sc = queue("fifo", 1, users + "]", tenants + "],");
  const auto run = simulate(sc);
  const double R = run.summary.latency_s.mean;
  const double X = static_cast<double>(run.summary.workflows.completed) / run.summary.end_s;
  double think = 0;
  std::size_t gaps = 0;
  // Measured think time: from one workflow's end to the same user's next arrival.
  std::vector<double> last_end(4, kNever);
  for (const InstanceRecord& i : run.trace.instances) {
    double& end = last_end[index(i.tenant)];
    if (end != kNever) {
      think += i.arrival_s - end;
      ++gaps;
    }
    end = i.end_s;
  }
  CHECK(gaps == 4 * 19999);
  const double Z = think / static_cast<double>(gaps);
  CHECK(Z == Approx(3.0).epsilon(0.03));
  CHECK(X * (R + Z) == Approx(4.0).epsilon(0.01));
  CHECK(run.summary.workflows.completed == 80000);
}

TEST_CASE("a job trace replays with each job's GPUs and duration", "[workload]") {
  // Durations are seconds on the reference GPU (unit-gpu, 100 TFLOP/s, no launch overhead).
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "tenants": [{"name": "a"}, {"name": "b"}],
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": "jobs.csv"}])");
  const auto run = simulate(sc);
  REQUIRE(run.trace.tasks.size() == 3);
  std::vector<double> durations, gpus;
  for (const auto& t : run.trace.tasks) {
    durations.push_back(t.end_s - t.compute_start_s);
    gpus.push_back(t.gpu_count);
  }
  CHECK_THAT(durations, Catch::Matchers::Approx(std::vector<double>{10, 5, 1}));
  CHECK(gpus == std::vector<double>{1, 2, 1});
  // The 2-GPU job waits for the first job's GPU; FIFO holds the third behind it.
  CHECK(run.trace.tasks[1].start_s == Approx(10));
  CHECK(run.summary.tenants[1].workflows.completed == 1);
  const std::string error = test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": "bad-jobs.csv"}]})");
  CHECK_THAT(error, Catch::Contains("bad-jobs.csv: line 3, gpus: expected a whole number of GPUs") &&
                        Catch::Contains("bad-jobs.csv: line 4, duration: expected seconds from 0 to 1e9 or a duration"));
}

TEST_CASE("a job trace takes numbers in any standard form and summarizes repeated errors", "[workload][input]") {
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": "exponent-jobs.csv"}])");
  const auto run = simulate(sc);
  REQUIRE(run.trace.tasks.size() == 3);
  std::vector<double> durations, gpus, arrivals;
  for (const auto& t : run.trace.tasks) {
    durations.push_back(t.end_s - t.compute_start_s);
    gpus.push_back(t.gpu_count);
    arrivals.push_back(run.trace.instances[index(t.instance)].arrival_s);
  }
  CHECK_THAT(durations, Catch::Matchers::Approx(std::vector<double>{10, 5, 1}));
  CHECK(gpus == std::vector<double>{1, 2, 1});
  CHECK_THAT(arrivals, Catch::Matchers::Approx(std::vector<double>{0, 2.5, 3}));

  const std::string error = test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": "many-bad-jobs.csv"}]})");
  // Five of the 40 bad gpus cells are listed, the rest counted; the one negative duration is listed.
  CHECK_THAT(error, Catch::Contains("many-bad-jobs.csv: line 3, gpus: expected a whole number of GPUs from 1 to 65536, found \"x0\"") &&
                        Catch::Contains("line 7, gpus") && !Catch::Contains("line 8, gpus") &&
                        Catch::Contains("and 35 more like the above: gpus cells that are not a whole number from 1 to 65536") &&
                        Catch::Contains("line 43, duration: expected seconds from 0 to 1e9 or a duration such as \"90 s\", found \"-3\""));
  std::size_t lines = 0;
  for (char c : error) lines += c == '\n';
  CHECK(lines < 12);
}
