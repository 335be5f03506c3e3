// Policies against cases whose winner is known: HEFT beats FIFO on a heterogeneous cluster;
// memory-aware avoids the reloads FIFO pays; priority and SJF reorder the queue; every registered
// policy completes the shipped scenarios.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "fleetsim/compare.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/time_bins.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using fleetsim::test::unit_scenario;

namespace {

Scenario with_policy(Scenario sc, const std::string& name) {
  sc.policy.name = name;
  sc.policy.params = PolicyParams();
  for (const ParamInfo& p : find_policy(name)->params) sc.policy.params.set(p.name, p.default_value);
  return sc;
}

}  // namespace

TEST_CASE("the registry has unique names, each with a summary and a reference", "[policy]") {
  std::set<std::string> names;
  for (const PolicyInfo& info : policy_registry()) {
    INFO(info.name);
    CHECK(names.insert(info.name).second);
    CHECK_FALSE(info.summary.empty());
    CHECK_FALSE(info.reference.empty());
    CHECK(info.make != nullptr);
  }
  CHECK(find_policy("fifo") != nullptr);
  CHECK(find_policy("nope") == nullptr);
}

TEST_CASE("HEFT puts a chain on the fast GPU that FIFO ignores", "[policy]") {
  // GPU 0 runs at 10 TFLOP/s, GPU 1 (another node) at 100: three 100-TFLOP tasks take 30 s on
  // GPU 0 (FIFO's lowest-numbered free GPU) and 3 s on GPU 1.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [
        {"type": "unit-node-1", "count": 1, "gpu_overrides": {"peak_flops": {"bf16": "10 TFLOP/s", "fp32": "5 TFLOP/s"}}},
        {"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "work": {"flop": "100 TFLOP"}}],
                         "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  CHECK(simulate(with_policy(sc, "fifo")).summary.makespan_s == Approx(30.0));
  CHECK(simulate(with_policy(sc, "heft")).summary.makespan_s == Approx(3.0));
}

TEST_CASE("memory-aware keeps each model on its own GPU where FIFO swaps", "[policy][memory]") {
  // Two 50 GB GPUs, models a and b of 40 GB each; single tasks alternate a, b, a, b, 10 s apart.
  // FIFO uses GPU 0 every time and reloads each model (4 loads, 3 evictions); memory-aware sends b
  // to GPU 1, so each model loads once.
  std::string tasks;
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "gpu_overrides": {"vram": "50 GB"}}]},
      "workflows": {"a": {"tasks": [{"name": "ta", "model": {"id": "a", "weights": "40 GB"}, "work": {"flop": "100 TFLOP"}}]},
                    "b": {"tasks": [{"name": "tb", "model": {"id": "b", "weights": "40 GB"}, "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "a", "arrival": {"process": "times", "times": ["0 s", "20 s"]}},
                   {"workflow": "b", "arrival": {"process": "times", "times": ["10 s", "30 s"]}}])");
  const auto fifo = simulate(with_policy(sc, "fifo")).summary;
  const auto aware = simulate(with_policy(sc, "memory-aware")).summary;
  CHECK(fifo.weight_loads == 4);
  CHECK(fifo.evictions == 3);
  CHECK(aware.weight_loads == 2);
  CHECK(aware.evictions == 0);
  CHECK(aware.latency_s.mean < fifo.latency_s.mean);
}

TEST_CASE("priority serves the important tenant first, sjf the short job", "[policy]") {
  // One GPU busy until 1 s; meanwhile a long job (low priority) and a short one (high priority) queue.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "tenants": [{"name": "batch", "priority": 0}, {"name": "interactive", "priority": 5}],
      "workflows": {"first": {"tasks": [{"name": "f", "work": {"flop": "100 TFLOP"}}]},
                    "long": {"tasks": [{"name": "l", "work": {"flop": "500 TFLOP"}}]},
                    "short": {"tasks": [{"name": "s", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"tenant": "batch", "workflow": "first", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"tenant": "batch", "workflow": "long", "arrival": {"process": "times", "times": ["0.1 s"]}},
                   {"tenant": "interactive", "workflow": "short", "arrival": {"process": "times", "times": ["0.2 s"]}}])");
  auto start_of = [](const RunResult& run, std::uint32_t instance) {
    for (const auto& t : run.trace.tasks) {
      if (index(t.instance) == instance) return t.start_s;
    }
    return -1.0;
  };
  const auto fifo = simulate(with_policy(sc, "fifo"));
  CHECK(start_of(fifo, 1) == Approx(1.0));  // long before short
  CHECK(start_of(fifo, 2) == Approx(6.0));
  for (const char* name : {"priority", "sjf"}) {
    INFO(name);
    const auto run = simulate(with_policy(sc, name));
    CHECK(start_of(run, 2) == Approx(1.0));  // short first
    CHECK(start_of(run, 1) == Approx(2.0));
  }
}

// Determinism: the golden test checks every shipped scenario's event sequence under every policy.
TEST_CASE("confidence intervals use Student's t", "[compare]") {
  const MetricStats s = mean_ci95({1, 2, 3, 4, 5});
  CHECK(s.mean == 3);
  CHECK(s.ci95 == Approx(2.776 * std::sqrt(2.5 / 5)));  // t(0.975, 4) x sd / sqrt(n)
  CHECK(mean_ci95({7}).ci95 == 0);
}

TEST_CASE("a comparison's verdict pairs runs by seed: lower, higher, not sure and the same", "[compare]") {
  // Latency means per seed; every other judged metric equal, so only latency gets a call.
  const auto runs_of = [](const std::string& policy, std::vector<double> latencies) {
    PolicyRuns r{policy, {}};
    for (std::size_t k = 0; k < latencies.size(); ++k) {
      Summary s;
      s.seed = 1 + k;
      s.makespan_s = 100;
      s.cost_usd = 5;
      s.latency_s.mean = latencies[k];
      r.runs.push_back(s);
    }
    return r;
  };
  // fifo is the baseline wherever it stands.
  const std::vector<PolicyRuns> results{runs_of("quick", {5, 6, 7}), runs_of("fifo", {10, 12, 14}), runs_of("close", {10.5, 11, 15}),
                                        runs_of("twin", {10, 12, 14}), runs_of("slow", {30, 36, 42})};
  const std::vector<PolicyVerdict> verdicts = compare_verdicts(results);
  REQUIRE(verdicts.size() == 4);
  const auto latency = [&](std::size_t p) {
    const auto& m = verdicts[p].metrics;
    const auto it = std::find_if(m.begin(), m.end(), [](const MetricVerdict& v) { return v.metric == "latency mean"; });
    REQUIRE(it != m.end());
    for (const MetricVerdict& v : m) {
      if (v.metric != "latency mean") CHECK(v.call == MetricVerdict::Call::same);
    }
    return *it;
  };
  CHECK(verdicts[0].policy == "quick");
  CHECK(verdicts[0].baseline == "fifo");
  // Differences -5, -6, -7: mean -6, sd 1, half-width t(0.975, 2) = 4.303 / sqrt(3).
  const MetricVerdict quick = latency(0);
  CHECK(quick.call == MetricVerdict::Call::lower);
  CHECK(quick.difference == Approx(-6));
  CHECK(quick.ci95 == Approx(4.303 / std::sqrt(3.0)));
  CHECK(quick.baseline == Approx(12));
  CHECK(quick.value == Approx(6));
  // Differences 0.5, -1, 1: mean 1/6, sd 1.0408: the interval holds no change; (1.96 sd / mean)^2 = 149.8, so 150 seeds.
  const MetricVerdict close = latency(1);
  CHECK(close.call == MetricVerdict::Call::not_sure);
  CHECK(close.seeds_to_settle == 150);
  CHECK(latency(2).call == MetricVerdict::Call::same);
  CHECK(latency(3).call == MetricVerdict::Call::higher);

  // The sentences: factors at 1.5x and more, percentages below, both means, the seeds that would settle it.
  std::ostringstream text;
  write_comparison_text(text, "s", 3, results);
  INFO(text.str());
  CHECK_THAT(text.str(), Catch::Contains("verdict: each policy against fifo") && Catch::Contains("paired by seed over 3 seeds"));
  CHECK_THAT(text.str(), Catch::Contains("quick  lower     latency mean 2x (12 s to 6 s, difference -6 s +- 2.484 s)"));
  CHECK_THAT(text.str(), Catch::Contains("close  not sure  latency mean 1.4% (12 s to 12.17 s, difference 0.1667 s +- 2.586 s; about 150 seeds"));
  CHECK_THAT(text.str(), Catch::Contains("twin   the same as fifo on every one"));
  CHECK_THAT(text.str(), Catch::Contains("slow   higher    latency mean 3x (12 s to 36 s"));
  CHECK_THAT(comparison_json("s", results), Catch::Contains(R"("call": "not sure")") && Catch::Contains(R"("seeds_to_settle": 150)"));

  // One run each (a trace replay): any difference is the answer, said without an interval.
  const std::vector<PolicyRuns> once{runs_of("fifo", {10}), runs_of("quick", {4})};
  const MetricVerdict one = compare_verdicts(once).front().metrics[1];
  CHECK(one.metric == "latency mean");
  CHECK(one.call == MetricVerdict::Call::lower);
  std::ostringstream single;
  write_comparison_text(single, "s", 1, once);
  CHECK_THAT(single.str(), Catch::Contains("one run each, so no interval") &&
                               Catch::Contains("quick  lower     latency mean 2.5x (10 s to 4 s)"));
}

TEST_CASE("one run each: a paired bootstrap over the instances says how sure a latency difference is", "[compare][bootstrap]") {
  // Every instance 5 s faster: paired, every resample differs by exactly -5 s (unpaired, the spread of
  // the latencies themselves would widen it).
  Rng rng(7, 0, "test");
  std::vector<double> base, faster, noise_a, noise_b;
  for (int i = 0; i < 2000; ++i) {
    base.push_back(60 + 50 * rng.uniform());
    faster.push_back(base.back() - 5);
    // Two independent standard normals (Box-Muller).
    const double r = std::sqrt(-2 * std::log(1 - rng.uniform())), angle = 2 * M_PI * rng.uniform();
    noise_a.push_back(r * std::cos(angle));
    noise_b.push_back(r * std::sin(angle));
  }
  const InstanceInterval shift = bootstrap_difference(base, faster, "latency mean");
  CHECK(shift.instances == 2000);
  CHECK(shift.low == Approx(-5));
  CHECK(shift.high == Approx(-5));
  // Independent N(0, 1) pairs: the difference of means has sd sqrt(2 / 2000); the 95% interval is about
  // +- 1.96 of it (the closed form the bootstrap approximates; its own resampling error is a few %).
  const InstanceInterval noise = bootstrap_difference(noise_a, noise_b, "latency mean");
  CHECK((noise.high - noise.low) / 2 == Approx(1.96 * std::sqrt(2.0 / 2000)).epsilon(0.1));
  // A difference that rests on one instance of a hundred: the resamples without it see none.
  std::vector<double> flat(100, 1.0), one_slow = flat;
  one_slow[37] = 101;
  const InstanceInterval lone = bootstrap_difference(flat, one_slow, "latency mean");
  CHECK(lone.low == 0);
  CHECK(lone.high >= 1);
  // p95 and p99 resample the same way; instances one run did not measure count on the other side only.
  CHECK(bootstrap_difference(base, faster, "latency p95").low == Approx(-5));
  std::vector<double> half = faster;
  for (std::size_t i = 0; i < half.size(); i += 2) half[i] = std::nan("");
  CHECK(bootstrap_difference(base, half, "latency p99").instances == 2000);
  CHECK(bootstrap_difference(base, half, "latency mean").high == Approx(-5).margin(2));
  // The same runs give the same interval.
  CHECK(bootstrap_difference(noise_a, noise_b, "latency mean").low == noise.low);
  // A draw in which one run measured none of the instances drawn is left out, not read as 0.
  std::vector<double> all_ones(100, 1.0), only_first(100, std::nan(""));
  only_first[0] = 5;
  const InstanceInterval sparse = bootstrap_difference(all_ones, only_first, "latency mean");
  CHECK(sparse.low == 4);
  CHECK(sparse.high == 4);
  CHECK(bootstrap_difference(only_first, only_first, "latency p99").instances == 1);  // those either run measured
  CHECK(bootstrap_difference(std::vector<double>(10, std::nan("")), std::vector<double>(10, std::nan("")), "latency mean").instances == 0);
  CHECK_THROWS_AS(bootstrap_difference(all_ones, all_ones, "latency p95x"), InternalError);

  // A trace replay: one run each, the latency verdicts with their intervals, said in words and in JSON.
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/trace-replay.json");
  const std::vector<PolicyRuns> results = compare_policies(sc, {"fifo", "las"}, 5, 2);
  REQUIRE(results[1].runs.size() == 1);
  REQUIRE(results[1].instance_intervals.size() == 3);
  CHECK(results[0].instance_intervals.empty());  // the baseline
  const std::vector<PolicyVerdict> verdicts = compare_verdicts(results);
  const MetricVerdict& mean = verdicts.front().metrics[1];
  REQUIRE(mean.metric == "latency mean");
  REQUIRE(mean.interval);
  CHECK(mean.interval->instances == 400);
  CHECK(mean.interval->low <= mean.difference);
  CHECK(mean.interval->high >= mean.difference);
  CHECK(mean.call == (mean.interval->high < 0 ? MetricVerdict::Call::lower : MetricVerdict::Call::not_sure));
  CHECK_FALSE(verdicts.front().metrics[0].interval);  // makespan: no interval
  CHECK(verdicts.front().seeds_repeat);
  std::ostringstream text;
  write_comparison_text(text, "trace-replay", 1, results);
  CHECK_THAT(text.str(), Catch::Contains("paired bootstrap, 95%") && Catch::Contains("95% interval") && Catch::Contains("over 400 instances"));
  CHECK_THAT(comparison_json("trace-replay", results), Catch::Contains(R"("instance_interval")"));
  // The page draws each policy's latency distribution from every run's instances.
  REQUIRE(results[1].latencies.size() == 1);
  CHECK(std::count_if(results[1].latencies[0].begin(), results[1].latencies[0].end(), [](double l) { return !std::isnan(l); }) == 400);
  std::ostringstream page;
  write_comparison_html(page, "trace-replay", results);
  CHECK_THAT(page.str(), Catch::Contains("id=\"compare-latency-cdf\"") && Catch::Contains("resample the workflow instances"));
  // And each policy's queue over its run, binned as the run page bins it: FIFO's is the scenario's own run's.
  REQUIRE(sc.policy.name == "fifo");
  const RunResult fifo = simulate(sc);
  CHECK(results[0].waiting == waiting_tasks(fifo.trace, fifo.summary.end_s, 200).series(1));
  const auto peak = [](const std::vector<std::pair<double, double>>& v) {
    return std::max_element(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->second;
  };
  CHECK(peak(results[0].waiting) > 10 * peak(results[1].waiting));  // FIFO's head-of-line queue; LAS preempts the long jobs
  CHECK_THAT(page.str(), Catch::Contains("id=\"compare-queue\""));
}

TEST_CASE("a comparison is the same on one thread and on several", "[compare][determinism]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/default.json");
  const auto one = compare_policies(sc, {"fifo", "memory-aware"}, 3, 1);
  const auto many = compare_policies(sc, {"fifo", "memory-aware"}, 3, 4);
  REQUIRE(one.size() == 2);
  for (std::size_t p = 0; p < one.size(); ++p) {
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(one[p].runs[k].seed == sc.seed + k);
      CHECK(one[p].runs[k].makespan_s == many[p].runs[k].makespan_s);
      CHECK(one[p].runs[k].latency_s.p95 == many[p].runs[k].latency_s.p95);
    }
  }
  CHECK_THROWS_WITH(compare_policies(sc, {"fifo", "fastest"}, 1, 1), Catch::Contains("unknown policy \"fastest\""));
}

TEST_CASE("a comparison shared by two ranks writes what one process writes", "[compare][determinism][ranks]") {
  // Two ranks as threads (test::on_two_ranks). Every output of the comparison, from either rank's runs, byte for byte: seeds paired (an odd number of runs,
  // so the ranks hold different counts), and one run each with the instances' bootstrap.
  const auto outputs = [](const std::string& scenario, const std::vector<PolicyRuns>& results) {
    std::ostringstream csv, page, text;
    write_comparison_csv(csv, results);
    write_comparison_html(page, scenario, results);
    write_comparison_text(text, scenario, static_cast<unsigned>(results.front().runs.size()), results);
    return csv.str() + comparison_json(scenario, results) + page.str() + text.str();
  };
  for (const auto& [file, names, runs] : {std::tuple{"default.json", std::vector<std::string>{"fifo", "memory-aware", "sjf"}, 3u},
                                          std::tuple{"trace-replay.json", std::vector<std::string>{"fifo", "las", "sjf"}, 1u}}) {
    INFO(file);
    const std::vector<std::string>& policies = names;  // a lambda may not capture a structured binding (clang before 16)
    const unsigned seeds = runs;
    const Scenario sc = load_scenario(test::source_dir() + "/scenarios/" + file);
    const std::string one = outputs(sc.name, compare_policies(sc, policies, seeds, 1));
    std::array<std::vector<PolicyRuns>, 2> shared;
    test::on_two_ranks([&](unsigned rank, const test::Exchange& exchange) {
      shared[rank] = compare_policies(sc, policies, seeds, 1, {}, {.rank = rank, .ranks = 2, .exchange = exchange});
    });
    REQUIRE(shared[0].front().runs.size() == seeds);
    if (seeds == 1) REQUIRE(!shared[0][1].instance_intervals.empty());
    CHECK(outputs(sc.name, shared[0]) == one);
    CHECK(outputs(sc.name, shared[1]) == one);
  }
}

TEST_CASE("gang-backfill lets a short task run before the blocked gang, never a long one", "[policy]") {
  // One 2-GPU node. t=0: L (3 s) on g0. t=1: gang G (2 GPUs, 1 s) must wait for L until 3 s;
  // S (1 s) ends by 2 s, before G's reservation, so it backfills onto g1 at 1 s; X (5 s) would
  // delay G, so it waits for G. FIFO would hold S behind G.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"l": {"tasks": [{"name": "l", "work": {"flop": "300 TFLOP"}}]},
                    "g": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "200 TFLOP"}}]},
                    "s": {"tasks": [{"name": "s", "work": {"flop": "100 TFLOP"}}]},
                    "x": {"tasks": [{"name": "x", "work": {"flop": "500 TFLOP"}}]}},
      "workload": [{"workflow": "l", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"workflow": "g", "arrival": {"process": "times", "times": ["1 s"]}},
                   {"workflow": "s", "arrival": {"process": "times", "times": ["1 s"]}},
                   {"workflow": "x", "arrival": {"process": "times", "times": ["1 s"]}}])");
  auto starts = [](const RunResult& run) {
    std::vector<double> s;
    for (const auto& t : run.trace.tasks) s.push_back(t.start_s);
    return s;
  };
  CHECK_THAT(starts(simulate(with_policy(sc, "gang-backfill"))), Catch::Matchers::Approx(std::vector<double>{0, 3, 1, 4}));
  CHECK_THAT(starts(simulate(with_policy(sc, "fifo"))), Catch::Matchers::Approx(std::vector<double>{0, 3, 4, 4}));
}

TEST_CASE("drf serves the tenant holding the fewest GPUs, las the job with the least service", "[policy]") {
  // Two GPUs. Tenant a runs a 10-s job and queues three 1-s jobs; tenant b queues one at 0.5 s.
  // FIFO runs b's job after a's three (at 3 s); DRF, when the second GPU frees at 1 s, sees a holding
  // one GPU and b none, and runs b's job.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
      "tenants": [{"name": "a"}, {"name": "b"}],
      "workflows": {"long": {"tasks": [{"name": "long", "work": {"flop": "1000 TFLOP"}}]},
                    "job": {"tasks": [{"name": "job", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"tenant": "a", "workflow": "long", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"tenant": "a", "workflow": "job", "arrival": {"process": "times", "times": ["0 s", "0.1 s", "0.2 s"]}},
                   {"tenant": "b", "workflow": "job", "arrival": {"process": "times", "times": ["0.5 s"]}}])");
  auto start_of_b = [](const RunResult& run) {
    for (const auto& t : run.trace.tasks) {
      if (index(t.tenant) == 1) return t.start_s;
    }
    return -1.0;
  };
  CHECK(start_of_b(simulate(with_policy(sc, "fifo"))) == Approx(3.0));
  CHECK(start_of_b(simulate(with_policy(sc, "drf"))) == Approx(1.0));
}

TEST_CASE("las runs the job with the least attained service first", "[policy]") {
  // Two GPUs. X holds g0 until 10 s. Chain A: a0 (1 s) on g1, then a1, a gang of 2, which must wait
  // for X. Job J (1 s) arrives at 2 s. FIFO keeps J behind the older a1 until a1 has run (10-11 s);
  // LAS sees A has had 1 GPU-second and J none, and runs J on the idle g1 at once.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"x": {"tasks": [{"name": "x", "work": {"flop": "1000 TFLOP"}}]},
                    "a": {"tasks": [{"name": "a0", "work": {"flop": "100 TFLOP"}}, {"name": "a1", "gpus": 2, "work": {"flop": "200 TFLOP"}}],
                          "edges": [{"from": "a0", "to": "a1"}]},
                    "j": {"tasks": [{"name": "j", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "x", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"workflow": "a", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"workflow": "j", "arrival": {"process": "times", "times": ["2 s"]}}])");
  CHECK(simulate(with_policy(sc, "las")).trace.tasks[3].start_s == Approx(2.0));
  CHECK(simulate(with_policy(sc, "fifo")).trace.tasks[3].start_s == Approx(11.0));
}

namespace {

// One GPU; a 10 s batch task at 0 s, then a 2 s task of a more important tenant at 3 s.
std::string preemption_scenario(const std::string& second_tenant, const std::string& extra = "",
                                const std::string& policy = R"({"name": "priority", "params": {"preempt": true}})") {
  return R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "tenants": [{"name": "batch", "priority": 0}, )" + second_tenant + R"(],
      "workflows": {"long": {"tasks": [{"name": "l", "work": {"flop": "1000 TFLOP"}}]},
                    "short": {"tasks": [{"name": "s", "work": {"flop": "200 TFLOP"}}]}},
      "workload": [{"tenant": "batch", "workflow": "long", "arrival": {"process": "times", "times": ["0 s"]}},
                   {"tenant": "urgent", "workflow": "short", "arrival": {"process": "times", "times": ["3 s"]}}],
      "policy": )" + policy + extra;
}

const TaskRecord& task_of(const RunResult& run, std::uint32_t instance) {
  for (const auto& t : run.trace.tasks) {
    if (index(t.instance) == instance) return t;
  }
  FAIL("no instance " << instance);
  throw;
}

}  // namespace

TEST_CASE("preemptive priority stops a lower-priority task at once and runs it again after", "[policy][preemption]") {
  // Without preemption the urgent task waits until 10 s. With it, the batch task stops at 3 s, the
  // urgent one runs 3-5 s, and the batch task starts over at 5 s (15 s), or, with a checkpoint every
  // second (restore 0.5 s), resumes its last 7 s at 5 s: 5 + 0.5 + 7 = 12.5 s.
  const std::string urgent = R"({"name": "urgent", "priority": 5})";
  const auto waits = simulate(unit_scenario(preemption_scenario(urgent, "", R"({"name": "priority"})")));
  CHECK(task_of(waits, 1).start_s == Approx(10.0).epsilon(1e-6));

  const auto run = simulate(unit_scenario(preemption_scenario(urgent)), {.record_link_samples = true});
  CHECK(task_of(run, 1).start_s == Approx(3.0).epsilon(1e-6));
  CHECK(task_of(run, 1).end_s == Approx(5.0).epsilon(1e-6));
  CHECK(task_of(run, 0).start_s == Approx(5.0).epsilon(1e-6));
  CHECK(task_of(run, 0).end_s == Approx(15.0).epsilon(1e-6));
  CHECK(run.summary.tasks_preempted == 1);
  CHECK(run.summary.tasks.completed == 2);
  CHECK(run.summary.lost_gpu_s == Approx(3.0).epsilon(1e-6));
  // The audit log: placed, preempted (with the reason), placed, placed again.
  REQUIRE(run.trace.decisions.size() == 4);
  CHECK(run.trace.decisions[1].kind == DecisionKind::preempted);
  CHECK(run.trace.decisions[1].time_s == Approx(3.0).epsilon(1e-6));
  CHECK_THAT(run.trace.reasons[run.trace.decisions[1].reason], Catch::Contains("priority 5"));
  CHECK(run.trace.decisions[3].kind == DecisionKind::placed);

  const auto resumed = simulate(unit_scenario(preemption_scenario(urgent, R"(, "faults": {"checkpoint": {"interval": "1 s", "restore": "0.5 s"}})")));
  CHECK(task_of(resumed, 0).end_s == Approx(12.5).epsilon(1e-6));
  CHECK(resumed.summary.tasks_stopped == 0);  // a preemption is not a failure
}

TEST_CASE("at equal priority an interactive task preempts a batch one, never the reverse", "[policy][preemption]") {
  const auto run = simulate(unit_scenario(preemption_scenario(R"({"name": "urgent", "class": "interactive"})")));
  CHECK(task_of(run, 1).start_s == Approx(3.0).epsilon(1e-6));
  CHECK(run.summary.tasks_preempted == 1);
  // Same class, same priority: no preemption.
  const auto peers = simulate(unit_scenario(preemption_scenario(R"({"name": "urgent"})")));
  CHECK(peers.summary.tasks_preempted == 0);
  CHECK(task_of(peers, 1).start_s == Approx(10.0).epsilon(1e-6));
}

TEST_CASE("interactive and batch classes are reported apart, and SLOs can name a class", "[policy][summary]") {
  const auto run = simulate(unit_scenario(preemption_scenario(R"({"name": "urgent", "class": "interactive"})",
                                                              R"(, "slos": [{"class": "interactive", "metric": "latency_p95", "target": "3 s"},
                                                                           {"class": "batch", "metric": "latency_p95", "target": "3 s"}])")));
  REQUIRE(run.summary.classes.size() == 2);
  CHECK(run.summary.classes[0].name == "batch");
  CHECK(run.summary.classes[0].latency_s.p95 == Approx(15.0).epsilon(1e-6));
  CHECK(run.summary.classes[1].name == "interactive");
  CHECK(run.summary.classes[1].latency_s.p95 == Approx(2.0).epsilon(1e-6));
  REQUIRE(run.summary.slos.size() == 2);
  CHECK(run.summary.slos[0].met);
  CHECK_FALSE(run.summary.slos[1].met);
  // Without interactive tenants there is no class breakdown.
  CHECK(simulate(unit_scenario(preemption_scenario(R"({"name": "urgent"})"))).summary.classes.empty());
}

TEST_CASE("a pinned tenant runs only on its nodes, an exclusive tenant's nodes run nobody else", "[policy][pinning]") {
  // Three 2-GPU nodes. "a" is pinned to n2; "b" keeps n0 for itself; "c" may go anywhere but n0.
  const Scenario sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 3}]},
      "tenants": [{"name": "a", "nodes": ["n2"]}, {"name": "b", "nodes": ["n0"], "exclusive": true}, {"name": "c"}],
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"tenant": "a", "workflow": "w", "arrival": {"process": "periodic", "interval": "0.1 s", "count": 20}},
                   {"tenant": "b", "workflow": "w", "arrival": {"process": "periodic", "interval": "0.1 s", "count": 20}},
                   {"tenant": "c", "workflow": "w", "arrival": {"process": "periodic", "interval": "0.1 s", "count": 20}}])");
  for (const char* policy : {"fifo", "least-loaded", "memory-aware", "heft", "drf"}) {
    INFO(policy);
    const auto run = simulate(with_policy(sc, policy));
    CHECK(run.summary.tasks.completed == 60);
    for (const TaskRecord& t : run.trace.tasks) {
      const std::uint32_t node = index(run.cluster.node_of(run.trace.gpus[t.gpu_begin]));
      if (index(t.tenant) == 0) CHECK(node == 2);
      if (index(t.tenant) == 1) CHECK(node == 0);
      if (index(t.tenant) == 2) CHECK(node != 0);
    }
  }
}

TEST_CASE("pinning mistakes are reported before the run", "[policy][pinning][errors]") {
  const auto error = [](const std::string& tenants, const std::string& gang = "1") {
    return fleetsim::test::scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
        "cluster": {"nodes": [{"type": "unit-node-2", "count": 2}]}, "tenants": )" + tenants + R"(,
        "workflows": {"w": {"tasks": [{"name": "t", "gpus": )" + gang + R"(, "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"tenant": "a", "workflow": "w", "arrival": {"process": "once"}}]})");
  };
  CHECK(error(R"([{"name": "a", "nodes": ["n1"]}])") == "");
  CHECK_THAT(error(R"([{"name": "a", "nodes": ["n7"]}])"), Catch::Contains("/tenants/0/nodes/0: expected a node of the cluster, \"n0\" to \"n1\""));
  CHECK_THAT(error(R"([{"name": "a", "exclusive": true}])"), Catch::Contains("/tenants/0/exclusive: an exclusive tenant needs \"nodes\""));
  CHECK_THAT(error(R"([{"name": "a", "nodes": ["n0"], "exclusive": true}, {"name": "b", "nodes": ["n0"], "exclusive": true}])"),
             Catch::Contains("/tenants/1/nodes: node n0 is already kept by exclusive tenant \"a\""));
  CHECK_THAT(error(R"([{"name": "a", "nodes": ["n1"]}])", "3"), Catch::Contains("tenant \"a\" may use 2 GPUs that can hold task \"t\""));
  CHECK_THAT(error(R"([{"name": "a", "class": "urgent"}])"), Catch::Contains("/tenants/0/class: expected one of"));
}

TEST_CASE("batching runs waiting instances of a task together, holding the first up to max_wait", "[policy][batching]") {
  // A memory-bound step on one GPU: 1 TFLOP (10 ms at 100 TFLOP/s) and 100 GB of weight reads (100 ms
  // at 1 TB/s), shared by a batch. Arrivals at 0, 10, 20, 30, 40 ms and 1 s; batches of up to 4.
  const auto scenario = [](const std::string& batching) {
    return unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
        "workflows": {"decode": {"tasks": [{"name": "step", "work": {"flop": "1 TFLOP", "bytes": "100 GB"}, "batching": )" + batching + R"(}]}},
        "workload": [{"workflow": "decode", "arrival": {"process": "times", "times": ["0 s", "10 ms", "20 ms", "30 ms", "40 ms", "1 s"]}}])");
  };
  const auto ends = [](const RunResult& run) {
    std::vector<double> e;
    for (const TaskRecord& t : run.trace.tasks) e.push_back(t.end_s);
    return e;
  };
  // Held: the fourth arrival fills a batch at 30 ms, which takes max(4 x 10 ms, 100 ms) = 100 ms; the fifth
  // waits its 50 ms, then for the GPU, and runs alone from 130 ms; the last waits 50 ms alone.
  const auto run = simulate(scenario(R"({"max_size": 4, "max_wait": "50 ms", "shared_bytes": 1})"), {.record_link_samples = true});
  const std::vector<double> expected{0.13, 0.13, 0.13, 0.13, 0.23, 1.15};
  const auto got = ends(run);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-9));
  CHECK(run.summary.batches == 1);
  CHECK(run.summary.batched_tasks == 4);
  CHECK(run.trace.tasks[1].start_s == Approx(0.03));
  CHECK_THAT(run.trace.reasons[run.trace.decisions[1].reason], Catch::Contains("batched with"));

  // No wait: whatever is ready when the GPU frees is batched. The first runs alone (0-100 ms), the next
  // four together (100-200 ms).
  const auto eager = simulate(scenario(R"({"max_size": 4, "shared_bytes": 1})"));
  const std::vector<double> eager_expected{0.1, 0.2, 0.2, 0.2, 0.2, 1.1};
  for (std::size_t i = 0; i < eager_expected.size(); ++i) CHECK(ends(eager)[i] == Approx(eager_expected[i]).epsilon(1e-9));

  // Nothing shared: a batch of n reads n times the bytes and saves nothing.
  const auto unshared = simulate(scenario(R"({"max_size": 4})"));
  CHECK(ends(unshared)[4] == Approx(0.5).epsilon(1e-9));
}

TEST_CASE("tasks of one model and operator batch together across workflows", "[policy][batching]") {
  // Two workflows decode with the same model and operator (1 TFLOP, 100 GB of shared weight reads per
  // step): a chat request of 1 step and a summary of 2 steps arrive together and run as one batch. Its
  // FLOP add up (3 TFLOP, 30 ms) and the largest member's bytes are read once (200 GB, 200 ms), so both end
  // at 200 ms; alone they would take 100 and 200 ms one after the other (ends at 100 and 300 ms).
  const auto run = [](const std::string& summary_op) {
    return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
        "workflows": {"chat": {"tasks": [{"name": "decode", "model": {"id": "m", "weights": "1 GB"},
                                          "work": {"operator": "unit-decode-step", "count": 1},
                                          "batching": {"max_size": 4, "max_wait": "10 ms", "shared_bytes": 1}}]},
                      "summary": {"tasks": [{"name": "decode", "model": {"id": "m", "weights": "1 GB"},
                                             "work": )" + summary_op + R"(,
                                             "batching": {"max_size": 4, "max_wait": "10 ms", "shared_bytes": 1}}]}},
        "workload": [{"workflow": "chat", "arrival": {"process": "once"}}, {"workflow": "summary", "arrival": {"process": "once"}}])"));
  };
  // (First each waits its 10 ms max_wait for a fuller batch, then the weights' 1 GB load over the 50 GB/s
  // host link takes 20 ms plus 4 us of latency.)
  const double load_s = 0.01 + 1e9 / 50e9 + 4e-6;
  const auto together = run(R"({"operator": "unit-decode-step", "count": 2})");
  CHECK(together.summary.batches == 1);
  CHECK(together.trace.tasks[0].end_s == Approx(load_s + 0.2).epsilon(1e-9));
  CHECK(together.trace.tasks[1].end_s == Approx(load_s + 0.2).epsilon(1e-9));
  // The same work given as FLOP and bytes (no operator) is not known to be the same kernel: no batch.
  const auto apart = run(R"({"flop": "2 TFLOP", "bytes": "200 GB"})");
  CHECK(apart.summary.batches == 0);
  CHECK(std::max(apart.trace.tasks[0].end_s, apart.trace.tasks[1].end_s) == Approx(load_s + 0.3).epsilon(1e-9));
}

TEST_CASE("batching is refused on gangs, and its fields are checked", "[policy][batching][errors]") {
  const auto error = [](const std::string& task) {
    return fleetsim::test::scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
        "cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
        "workflows": {"w": {"tasks": [)" + task + R"(]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  CHECK_THAT(error(R"({"name": "t", "gpus": 2, "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 4}})"),
             Catch::Contains("/workflows/w/tasks/0/batching: only single-GPU tasks are batched"));
  CHECK_THAT(error(R"({"name": "t", "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 0}})"), Catch::Contains("/batching/max_size"));
  CHECK(error(R"({"name": "t", "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 1}})") == "");  // 1: no batching
  CHECK_THAT(error(R"({"name": "t", "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 4, "shared_bytes": 2}})"),
             Catch::Contains("/batching/shared_bytes"));
  CHECK_THAT(error(R"({"name": "t", "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 4, "max_wait": 5}})"),
             Catch::Contains("/batching/max_wait"));
}

TEST_CASE("a comparison of several tenants reports each tenant's p95 and wait", "[compare]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/default.json");
  const auto results = compare_policies(sc, {"fifo"}, 1, 1);
  const Summary& run = results.front().runs.front();
  const auto metrics = compared_metrics(results);
  const auto find = [&](const std::string& name) {
    const auto it = std::find_if(metrics.begin(), metrics.end(), [&](const ComparedMetric& m) { return m.name == name; });
    REQUIRE(it != metrics.end());
    return it->read(run);
  };
  REQUIRE(run.tenants.size() == 2);
  CHECK(find("design latency p95") == run.tenants[0].latency_s.p95);
  CHECK(find("marketing task wait") == run.tenants[1].mean_wait_s);
  CHECK(find("marketing latency p95") > 0);
  // One tenant: the cluster's metrics alone.
  Summary alone = run;
  alone.tenants.resize(1);
  CHECK(compared_metrics(alone).size() == metrics.size() - 4);

  // Rows that mean nothing are left out: SLOs met without SLOs, the weight-load rows without loads, VRAM unused.
  const auto names = [](const std::vector<PolicyRuns>& r) {
    std::set<std::string> all;
    for (const ComparedMetric& m : compared_metrics(r)) all.insert(m.name);
    return all;
  };
  REQUIRE(run.weight_loads > 0);
  REQUIRE(!run.slos.empty());
  CHECK(names(results).contains("SLOs met"));
  CHECK(names(results).contains("weight loads"));
  std::vector<PolicyRuns> bare = results;
  bare.front().runs.front().slos.clear();
  bare.front().runs.front().weight_loads = 0;
  bare.front().runs.front().vram_utilization = 0;
  CHECK_FALSE(names(bare).contains("SLOs met"));
  CHECK_FALSE(names(bare).contains("weight loads"));
  CHECK_FALSE(names(bare).contains("weight load time"));
  CHECK_FALSE(names(bare).contains("VRAM utilization"));
  CHECK(names(bare).size() == names(results).size() - 4);
  std::ostringstream csv;
  write_comparison_csv(csv, bare);
  CHECK(csv.str().find("SLOs met") == std::string::npos);
}

TEST_CASE("a scenario that draws nothing at random runs once a policy in a comparison, and every seed gives it the same run", "[compare][determinism]") {
  // Every shipped scenario: where seed_use finds nothing the seed decides, seeds 1 and 2 give the same summary
  // (the claim compare relies on to run it once); where it finds something, it names it.
  std::size_t seed_free = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/scenarios")) {
    if (entry.path().extension() != ".json") continue;
    const Scenario sc = load_scenario(entry.path().string());
    const std::string use = seed_use(sc);
    if (!use.empty()) continue;
    ++seed_free;
    INFO(entry.path().filename().string());
    Summary a = simulate(sc, {.seed = 1}).summary, b = simulate(sc, {.seed = 2}).summary;
    b.seed = a.seed;
    CHECK(summary_json(a) == summary_json(b));
  }
  CHECK(seed_free >= 2);  // the LLM training scenario and the trace replay at least
  const Scenario trace = load_scenario(test::source_dir() + "/scenarios/trace-replay.json");
  CHECK(seed_use(trace).empty());
  const auto runs = compare_policies(trace, {"fifo", "las"}, 5, 1);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].runs.size() == 1);
  CHECK(runs[1].runs.size() == 1);
  // Poisson arrivals are the seed's.
  CHECK(seed_use(load_scenario(test::source_dir() + "/scenarios/default.json")).find("arrivals of workflow") != std::string::npos);
  CHECK(compare_policies(load_scenario(test::source_dir() + "/scenarios/default.json"), {"fifo"}, 2, 1).front().runs.size() == 2);
}
