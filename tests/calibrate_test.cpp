// Calibration: fits recover the laws they assume, profiles read back what was written, bad profiles
// are refused with the field named, and a profile replaces exactly the figures it names.
#include <catch2/catch.hpp>
#include <cmath>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/fit.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/topology.hpp"
#include "helpers.hpp"

using namespace fleetsim;

TEST_CASE("alpha-beta fit recovers a fixed cost and a rate from exact points", "[calibrate]") {
  const double alpha = 5e-6, rate = 2e10;
  std::vector<double> sizes{1e3, 1e5, 1e7, 1e9}, seconds;
  for (double s : sizes) seconds.push_back(alpha + s / rate);
  const AlphaBeta fit = fit_alpha_beta(sizes, seconds);
  CHECK(fit.alpha_s == Approx(alpha).epsilon(1e-6));
  CHECK(fit.rate == Approx(rate).epsilon(1e-6));
  CHECK(fit.max_rel_residual < 1e-9);
}

TEST_CASE("alpha-beta fit keeps the fixed cost non-negative", "[calibrate]") {
  // Times that a free fit would explain with a negative fixed cost: it goes through the origin instead.
  const std::vector<double> sizes{1e6, 2e6, 4e6}, seconds{0.9e-3, 2.0e-3, 4.1e-3};
  const AlphaBeta fit = fit_alpha_beta(sizes, seconds);
  CHECK(fit.alpha_s == 0);
  CHECK(fit.rate == Approx(1e9).epsilon(0.1));
  CHECK(fit.max_rel_residual > 0);
}

TEST_CASE("alpha-beta fit refuses what it cannot fit", "[calibrate]") {
  const std::vector<double> one{1e6}, two{1e6, 1e6}, times{1e-3, 2e-3}, bad{1e-3, -1};
  CHECK_THROWS_AS(fit_alpha_beta(one, std::vector<double>{1e-3}), std::invalid_argument);
  CHECK_THROWS_AS(fit_alpha_beta(two, times), std::invalid_argument);                               // one size
  CHECK_THROWS_AS(fit_alpha_beta(std::vector<double>{1, 2}, bad), std::invalid_argument);          // negative time
}

TEST_CASE("rate fit goes through the origin and weighs points by relative error", "[calibrate]") {
  const std::vector<double> sizes{1e8, 4e8}, exact{1e-2, 4e-2};
  CHECK(fit_rate(sizes, exact).rate == Approx(1e10));
  CHECK(fit_rate(sizes, exact).alpha_s == 0);
  // One point 10% slow, one 10% fast: no nearby rate has a smaller sum of squared relative time errors.
  const std::vector<double> spread{1.1e-2, 4e-2 / 1.1};
  const AlphaBeta fit = fit_rate(sizes, spread);
  auto squared_error = [&](double rate) {
    double sum = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) sum += std::pow((sizes[i] / rate - spread[i]) / spread[i], 2);
    return sum;
  };
  CHECK(fit.rate > 1e10 * 0.95);
  CHECK(fit.rate < 1e10 * 1.05);
  CHECK(squared_error(fit.rate) < squared_error(fit.rate * 1.01));
  CHECK(squared_error(fit.rate) < squared_error(fit.rate / 1.01));
  CHECK_THROWS_AS(fit_rate(std::vector<double>{0}, std::vector<double>{1}), std::invalid_argument);
}

namespace {

Profile example_profile() {
  Profile p;
  p.file = "example.json";
  p.provenance = {{"backend", "cpu"}, {"device", "test CPU"}};
  GpuCalibration core{.id = "cpu-core", .peak_flop_per_s = {}, .memory_bandwidth_Bps = 3.5e10, .launch_overhead_s = 4e-6};
  core.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] = 4.1e10;
  p.gpus.push_back(core);
  p.links.push_back({.id = "host-memcpy", .bandwidth_Bps = 1.2e10, .latency_s = 1e-6});
  p.measurements.push_back({"gemm", Dtype::fp32, 3.3e7, 8e-4, ""});
  p.measurements.push_back({"stream", Dtype::fp32, 1.28e8, 3.6e-3, "", 0.04});
  return p;
}

std::string profile_error(const std::string& json) {
  try {
    parse_profile(json, "p.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a profile reads back what profile_json wrote", "[calibrate]") {
  const Profile p = example_profile();
  const Profile q = parse_profile(profile_json(p), "round.json");
  CHECK(q.provenance == p.provenance);
  REQUIRE(q.gpus.size() == 1);
  CHECK(q.gpus[0].id == "cpu-core");
  CHECK(*q.gpus[0].peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] == Approx(4.1e10));
  CHECK_FALSE(q.gpus[0].peak_flop_per_s[static_cast<std::size_t>(Dtype::fp64)].has_value());
  CHECK(*q.gpus[0].memory_bandwidth_Bps == Approx(3.5e10));
  CHECK(*q.gpus[0].launch_overhead_s == Approx(4e-6));
  REQUIRE(q.links.size() == 1);
  CHECK(*q.links[0].bandwidth_Bps == Approx(1.2e10));
  REQUIRE(q.measurements.size() == 2);
  CHECK(q.measurements[1].kernel == "stream");
  CHECK(q.measurements[1].seconds == Approx(3.6e-3));
  CHECK(q.measurements[1].spread == Approx(0.04));
  CHECK(q.measurements[0].spread == 0);  // not recorded
}

TEST_CASE("malformed profiles are refused with the file and field named", "[calibrate]") {
  CHECK_THAT(profile_error(R"({"provenance": {}})"), Catch::Contains("p.json: /fleetsim_profile"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 2, "provenance": {}})"), Catch::Contains("/fleetsim_profile"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {"date": 3}})"), Catch::Contains("/provenance/date: expected a string"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "gpus": {"cpu-core": {"memory_bandwidth": "fast"}}})"),
             Catch::Contains("/gpus/cpu-core/memory_bandwidth"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "links": {"x": {"bandwidth": "-1 GB/s"}}})"),
             Catch::Contains("/links/x/bandwidth"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "measurements": [{"kernel": "fft", "size": 1, "seconds": 1}]})"),
             Catch::Contains("/measurements/0/kernel"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "measurements": [{"kernel": "gemm", "size": 1, "seconds": 1, "spread": -0.1}]})"),
             Catch::Contains("/measurements/0/spread: expected a number from 0"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "speed": 1})"), Catch::Contains("/speed"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1,)"), Catch::Contains("p.json"));
}

TEST_CASE("a profile replaces only the figures it names, on the types it names", "[calibrate]") {
  Scenario sc = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  const GpuType before = sc.cluster.groups[0].gpu;
  const LinkType nic_before = sc.cluster.groups[0].nic;
  CHECK(apply_profile(sc.cluster, example_profile()) == 3);  // the GPU type, and host-memcpy as GPU link and host link
  const GpuType& after = sc.cluster.groups[0].gpu;
  CHECK(after.peak_for(Dtype::fp32) == Approx(4.1e10));
  CHECK(after.peak_for(Dtype::fp64) == before.peak_for(Dtype::fp64));  // not in the profile
  CHECK(after.memory_bandwidth_Bps == Approx(3.5e10));
  CHECK(after.source == "calibrated: example.json");
  CHECK(sc.cluster.groups[0].gpu_link.bandwidth_Bps == Approx(1.2e10));
  CHECK(sc.cluster.groups[0].nic.bandwidth_Bps == nic_before.bandwidth_Bps);

  Scenario other = load_scenario(test::source_dir() + "/scenarios/default.json");
  CHECK(apply_profile(other.cluster, example_profile()) == 0);
}

TEST_CASE("a profile's shared memory bandwidth becomes the node's memory bus, and read back", "[calibrate][memory-bus]") {
  Profile p = example_profile();
  p.gpus[0].shared_memory_bandwidth_Bps = 5e10;
  const Profile q = parse_profile(profile_json(p), "round.json");
  REQUIRE(q.gpus.size() == 1);
  CHECK(*q.gpus[0].shared_memory_bandwidth_Bps == Approx(5e10));
  Scenario sc = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  CHECK(sc.cluster.groups[0].node.memory_bus_Bps == 0);  // the catalog's cpu-host has none
  apply_profile(sc.cluster, q);
  CHECK(sc.cluster.groups[0].node.memory_bus_Bps == Approx(5e10));
  // Without it (an older profile), the node keeps no bus.
  Scenario old = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  apply_profile(old.cluster, example_profile());
  CHECK(old.cluster.groups[0].node.memory_bus_Bps == 0);
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "gpus": {"cpu-core": {"shared_memory_bandwidth": "0 GB/s"}}})"),
             Catch::Contains("/gpus/cpu-core/shared_memory_bandwidth: expected a positive bandwidth"));
}

TEST_CASE("a profile's compute pool becomes the node's, at most its devices' worth, and read back", "[calibrate][compute-pool]") {
  Profile p = example_profile();
  p.gpus[0].compute_pool_devices = 1.4;
  const Profile q = parse_profile(profile_json(p), "round.json");
  REQUIRE(q.gpus.size() == 1);
  CHECK(*q.gpus[0].compute_pool_devices == Approx(1.4));
  Scenario sc = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  CHECK(sc.cluster.groups[0].node.compute_pool_devices == 0);  // the catalog's cpu-host has none
  apply_profile(sc.cluster, q);
  CHECK(sc.cluster.groups[0].node.compute_pool_devices == Approx(1.4));
  // Measured on more workers than the scenario's node has devices: no more than the node's devices.
  p.gpus[0].compute_pool_devices = 3.5;
  Scenario fewer = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  apply_profile(fewer.cluster, p);
  CHECK(fewer.cluster.groups[0].node.compute_pool_devices == Approx(2));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "gpus": {"cpu-core": {"compute_pool": 0}}})"),
             Catch::Contains("/gpus/cpu-core/compute_pool"));
}

// A CPU calibration's points, made up to round numbers, fitted, and run back through the simulator: each
// mix of work goes at the rate the calibration measured for it.
namespace {

Profile two_worker_calibration() {
  Profile p;
  const auto point = [&](std::string kernel, Dtype dtype, double size, double rate, double fixed_s = 0) {
    p.measurements.push_back({.kernel = std::move(kernel), .dtype = dtype, .size = size, .seconds = fixed_s + size / rate, .devices = "", .spread = 0});
  };
  for (double flop : {1e8, 1e9}) {
    point("gemm", Dtype::fp32, flop, 20e9);  // every worker on GEMMs: 20 GFLOP/s each
    point("gemm", Dtype::fp64, flop, 10e9);
  }
  point("gemm-alone", Dtype::fp32, 2.68e8, 28e9);  // one alone: 28
  for (double bytes : {1e8, 5e8}) {
    point("stream", Dtype::fp32, bytes, 10e9);        // every worker streaming: 10 GB/s each
    point("stream-alone", Dtype::fp32, bytes, 16e9);  // one alone: 16
  }
  for (double bytes : {1e7, 1e8}) point("memcpy", Dtype::fp32, bytes, 5e9, 10e-6);
  point("launch", Dtype::fp32, 0, 1, 1e-6);
  fit_cpu_profile(p, 2);
  p.file = "made-up.json";
  return p;
}

// The tasks, all ready at 0 on the calibrated two-worker node: each task's duration.
std::vector<double> run_calibrated(const std::vector<std::string>& works) {
  std::string tasks;
  for (std::size_t i = 0; i < works.size(); ++i) {
    tasks += std::string(i ? ", " : "") + R"({"name": "t)" + std::to_string(i) + R"(", "work": )" + works[i] + "}";
  }
  Scenario sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": "cpu-host", "count": 1}]}, "workflows": {"w": {"tasks": [)" + tasks +
                                       R"(]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  apply_profile(sc.cluster, two_worker_calibration());
  const RunResult r = simulate(sc);
  std::vector<double> seconds;
  for (const TaskRecord& t : r.trace.tasks) seconds.push_back(t.end_s - t.start_s);
  return seconds;
}

const std::string kCpuGemm = R"({"flop": "28 GFLOP", "dtype": "fp32"})";    // 1 s alone at 28 GFLOP/s
const std::string kCpuStream = R"({"flop": "1 MFLOP", "bytes": "16 GB", "dtype": "fp32"})";  // 1 s alone at 16 GB/s

}  // namespace

TEST_CASE("a CPU calibration's fit gives each worker the rate measured beside what it ran beside", "[calibrate][compute-pool][memory-bus]") {
  const Profile p = two_worker_calibration();
  REQUIRE(p.gpus.size() == 1);
  const GpuCalibration& core = p.gpus[0];
  CHECK(*core.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] == Approx(28e9));  // one worker alone
  CHECK(*core.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp64)] == Approx(14e9));  // fp64 by the fp32 ratio
  CHECK(*core.compute_pool_devices == Approx(2 * 20.0 / 28));
  CHECK(*core.memory_bandwidth_Bps == Approx(16e9));
  CHECK(*core.shared_memory_bandwidth_Bps == Approx(20e9));
  // Alone, a GEMM and a stream take their 1 s (and a 1 us launch).
  CHECK(run_calibrated({kCpuGemm})[0] == Approx(1.0).epsilon(1e-4));
  CHECK(run_calibrated({kCpuStream})[0] == Approx(1.0).epsilon(1e-4));
  // Two GEMMs side by side go at the all-busy 20 GFLOP/s: 1.4 s; two streams at 10 GB/s: 1.6 s.
  for (double s : run_calibrated({kCpuGemm, kCpuGemm})) CHECK(s == Approx(1.4).epsilon(1e-4));
  for (double s : run_calibrated({kCpuStream, kCpuStream})) CHECK(s == Approx(1.6).epsilon(1e-4));
  // A GEMM beside a stream: neither draws on what the other is short of, and both keep their rates alone.
  for (double s : run_calibrated({kCpuGemm, kCpuStream})) CHECK(s == Approx(1.0).epsilon(1e-4));
  // One worker has nothing to share: its rates are the all-busy ones, no pool and no bus.
  Profile one = two_worker_calibration();
  one.gpus.clear();
  one.links.clear();
  fit_cpu_profile(one, 1);
  CHECK(*one.gpus[0].peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] == Approx(20e9));
  CHECK_FALSE(one.gpus[0].compute_pool_devices);
  CHECK_FALSE(one.gpus[0].shared_memory_bandwidth_Bps);
}

TEST_CASE("a CPU profile checked on this machine: each figure against the rate the simulator gives its mix", "[calibrate]") {
  Profile p = two_worker_calibration();
  p.provenance = {{"workers", "2"}};
  const std::vector<ProfileFigure> figures = check_cpu_profile(p, 1);
  REQUIRE(figures.size() == 4);
  CHECK(figures[0].name == "fp32 GEMM, one worker alone");
  CHECK(figures[0].profile == Approx(28e9));
  CHECK(figures[1].name == "fp32 GEMM, every worker");
  CHECK(figures[1].profile == Approx(20e9));  // the pool's share: 28 x (40 / 28) / 2
  CHECK(figures[2].name == "stream, one worker alone");
  CHECK(figures[2].profile == Approx(16e9));
  CHECK(figures[3].name == "stream, every worker");
  CHECK(figures[3].profile == Approx(10e9));  // half the 20 GB/s bus
  CHECK(figures[0].unit == Dimension::flop_rate);
  CHECK(figures[3].unit == Dimension::bandwidth);
  for (const ProfileFigure& f : figures) CHECK((f.measured > 0 && std::isfinite(f.measured)));
  // A profile a thousand times faster than any CPU core: the check finds this machine far slower.
  Profile fast = p;
  for (auto& rate : fast.gpus[0].peak_flop_per_s) {
    if (rate) *rate *= 1e3;
  }
  *fast.gpus[0].memory_bandwidth_Bps *= 1e3;
  *fast.gpus[0].shared_memory_bandwidth_Bps *= 1e3;
  for (const ProfileFigure& f : check_cpu_profile(fast, 1)) CHECK(f.change() < -0.9);
  // One worker: one GEMM and one stream, at the profile's rates.
  Profile one = p;
  one.provenance = {{"workers", "1"}};
  const std::vector<ProfileFigure> single = check_cpu_profile(one, 1);
  REQUIRE(single.size() == 2);
  CHECK(single[0].name == "fp32 GEMM");
  CHECK(single[0].profile == Approx(28e9));  // the pool of 1.43, capped at the one worker, takes nothing
  CHECK(single[1].name == "stream");
  // A profile without a CPU's rates has nothing to check.
  Profile gpu_only;
  GpuCalibration h100;
  h100.id = "h100-sxm";
  h100.memory_bandwidth_Bps = 3.35e12;
  gpu_only.gpus.push_back(h100);
  CHECK(check_cpu_profile(gpu_only, 1).empty());
  Profile launch_only = p;
  launch_only.gpus[0].peak_flop_per_s = {};
  CHECK(check_cpu_profile(launch_only, 1).empty());
}

// nccl-tests logs: a recorded run read row by row, fitted, and the fit run back through the simulator.
namespace {

const std::string kNcclLog = test::source_dir() + "/tests/data/nccl-tests/all_reduce_8ranks.log";

std::string nccl_error(const std::string& text) {
  try {
    parse_nccl_tests_log(text, "run.log");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kRankLine = "#  Rank  0 Group  0 Pid  1 on  host0 device  0 [0x00] Some GPU\n";

}  // namespace

TEST_CASE("a recorded nccl-tests log is read with every column", "[calibrate][nccl-tests]") {
  const NcclTestsLog log = load_nccl_tests_log(kNcclLog);
  CHECK(log.op == CollectiveOp::all_reduce);
  CHECK(log.ranks == 8);
  CHECK(log.hosts == std::vector<std::string>{"node0"});
  REQUIRE(log.rows.size() == 11);
  const NcclTestsRow& last = log.rows.back();
  CHECK(last.bytes == 33554432);
  CHECK(last.count == 8388608);
  CHECK(last.type == "float");
  CHECK(last.redop == "sum");
  CHECK(last.root == -1);
  CHECK(last.out_of_place.time_s == Approx(195.40e-6));
  CHECK(last.in_place.busbw_Bps == Approx(300.52e9));
  CHECK(last.out_of_place.wrong == 0);
  REQUIRE(log.avg_busbw_Bps.has_value());
  // The log's own figures obey nccl-tests' definitions: algbw = size / time, busbw = algbw x 2(n-1)/n.
  for (const NcclTestsRow& r : log.rows) {
    CHECK(r.bytes / r.out_of_place.time_s == Approx(r.out_of_place.algbw_Bps).epsilon(0.01));
    if (r.out_of_place.algbw_Bps > 5e9) {  // two decimals in GB/s: smaller figures are too rounded to compare
      CHECK(r.out_of_place.busbw_Bps / r.out_of_place.algbw_Bps == Approx(bus_bandwidth_factor(CollectiveOp::all_reduce, 8)).epsilon(0.01));
    }
  }
}

TEST_CASE("an nccl-tests fit, applied, makes the simulator reproduce the log's bus bandwidth", "[calibrate][nccl-tests]") {
  const NcclTestsLog log = load_nccl_tests_log(kNcclLog);
  const NcclTestsFit fit = fit_nccl_tests(log, CollectiveOp::all_reduce, CollectiveAlgo::ring, "hgx-h100-8");
  CHECK(fit.link_id == "nvlink4");
  REQUIRE(fit.profile.links.size() == 1);
  CHECK(fit.profile.measurements.size() == 11);

  ClusterSpec spec = cluster_of("hgx-h100-8", 1);
  CHECK(apply_profile(spec, parse_profile(profile_json(fit.profile), "fit.json")) == 1);
  const Cluster cluster(spec);
  const Topology topology(cluster, spec.fabric);
  std::vector<GpuId> gpus;
  for (std::uint32_t i = 0; i < 8; ++i) gpus.push_back(make_id<GpuId>(i));
  const auto points = sweep_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, gpus, 32768, 33554432, 2);
  REQUIRE(points.size() == log.rows.size());
  // The flow model with the fitted link gives back the log's figures at both ends of the sweep...
  CHECK(points.front().time_s == Approx(log.rows.front().out_of_place.time_s).epsilon(0.005));
  CHECK(points.back().busbw_Bps == Approx(log.rows.back().out_of_place.busbw_Bps).epsilon(0.005));
  // ...and, in between, stays within the error an alpha-beta model has across NCCL's protocol changes.
  for (std::size_t i = 0; i < points.size(); ++i) {
    CHECK(std::abs(points[i].time_s - log.rows[i].out_of_place.time_s) / log.rows[i].out_of_place.time_s < 0.30);
    CHECK(points[i].time_s == Approx(fit.rows[i].fitted_s).epsilon(0.005));
  }
}

TEST_CASE("older nccl-tests layouts and MPI rank prefixes are read", "[calibrate][nccl-tests]") {
  const std::string old_layout =
      "# nThread 1 nGpus 2 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
      "#   Rank  0 Pid   11 on  hostA device  0 [0x00] Tesla V100-SXM2-16GB\n"
      "#   Rank  1 Pid   12 on  hostA device  1 [0x00] Tesla V100-SXM2-16GB\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "[0]      1048576        262144     float     sum[0]    40.00   26.21   26.21  0e+00    40.00   26.21   26.21  0e+00\n"
      "      2097152        524288     float     sum    70.00   29.96   29.96    N/A    70.00   29.96   29.96    N/A\n";
  const NcclTestsLog log = parse_nccl_tests_log(old_layout, "old.log");
  CHECK_FALSE(log.op.has_value());
  CHECK(log.ranks == 2);
  CHECK(log.device == "Tesla V100-SXM2-16GB");
  REQUIRE(log.rows.size() == 2);
  CHECK(log.rows[0].root == -1);
  CHECK(log.rows[0].out_of_place.wrong == 0);
  CHECK(log.rows[1].in_place.wrong == -1);
  CHECK(log.rows[1].out_of_place.time_s == Approx(70e-6));
}

TEST_CASE("malformed nccl-tests logs are refused with the line and column named", "[calibrate][nccl-tests]") {
  const std::string row = "     1048576        262144     float     sum      -1    40.00   26.21   45.87      0    40.00   26.21   45.87      0\n";
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum      -1    fast   26.21   45.87      0    40.00   26.21   45.87      0\n"),
             Catch::Contains("run.log: line 2, column time: expected a number, found \"fast\""));
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum      -1    40.00   26.21   45.87      3    40.00   26.21   45.87      0\n"),
             Catch::Contains("line 2, column #wrong: 3 wrong elements (out-of-place)"));
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum      -1    40.00   26.21\n"),
             Catch::Contains("line 2: expected a result row of 12 or 13 columns"));
  // Found by fuzzing: a count no integer holds was converted regardless (undefined behaviour).
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        3.8e67     float     sum      -1    40.00   26.21   45.87      0    40.00   26.21   45.87      0\n"),
             Catch::Contains("line 2, column count: expected a whole number up to 2^53, found \"3.8e67\""));
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum     0.5    40.00   26.21   45.87      0    40.00   26.21   45.87      0\n"),
             Catch::Contains("column root: expected a whole number"));
  CHECK_THAT(nccl_error(kRankLine), Catch::Contains("run.log: expected nccl-tests result rows"));
  CHECK_THAT(nccl_error(row), Catch::Contains("expected the \"# Using devices\" rank lines"));
  CHECK_THAT(nccl_error(std::string("# Collective test starting: fancy_perf\n") + kRankLine + row), Catch::Contains("unknown test \"fancy_perf\""));
  CHECK(nccl_error(std::string(kRankLine) + row).empty());
  // Not numbers, though strtod and from_chars read them as such.
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum      -1    inf   26.21   45.87      0    40.00   26.21   45.87      0\n"),
             Catch::Contains("run.log: line 2, column time: expected a number, found \"inf\""));
  CHECK_THAT(nccl_error(std::string(kRankLine) + "     1048576        262144     float     sum      -1    40.00   26.21   nan      0    40.00   26.21   45.87      0\n"),
             Catch::Contains("run.log: line 2, column busbw: expected a number, found \"nan\""));
}

TEST_CASE("nccl-tests fits the model cannot represent are refused", "[calibrate][nccl-tests]") {
  const std::string rows =
      "     1048576        262144     float     sum      -1    40.00   26.21   45.87      0    40.00   26.21   45.87      0\n"
      "     2097152        524288     float     sum      -1    70.00   29.96   52.43      0    70.00   29.96   52.43      0\n";
  const std::string two_hosts = std::string(kRankLine) + "#  Rank  1 Group  0 Pid  2 on  host1 device  0 [0x00] Some GPU\n" + rows;
  CHECK_THROWS_WITH(fit_nccl_tests(parse_nccl_tests_log(two_hosts, "two.log"), CollectiveOp::all_reduce, CollectiveAlgo::ring, "hgx-h100-8"),
                    Catch::Contains("spans 2 hosts"));
  std::string sixteen;
  for (int r = 0; r < 16; ++r) sixteen += "#  Rank " + std::to_string(r) + " Group 0 Pid 1 on host0 device 0 [0x00] GPU\n";
  CHECK_THROWS_WITH(fit_nccl_tests(parse_nccl_tests_log(sixteen + rows, "big.log"), CollectiveOp::all_reduce, CollectiveAlgo::ring, "hgx-h100-8"),
                    Catch::Contains("16 ranks but a hgx-h100-8 node has 8 GPUs"));
  CHECK_THROWS_WITH(fit_nccl_tests(parse_nccl_tests_log(std::string(kRankLine) + rows.substr(0, rows.find('\n') + 1), "one.log"),
                                   CollectiveOp::all_reduce, CollectiveAlgo::ring, "hgx-h100-8"),
                    Catch::Contains("two or more sizes"));
}
