// Calibration: fits recover the laws they assume, profiles read back what was written, bad profiles
// are refused with the field named, and a profile replaces exactly the figures it names.
#include <catch2/catch.hpp>
#include <cmath>

#include "fleetsim/error.hpp"
#include "fleetsim/fit.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/scenario.hpp"
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
  p.measurements.push_back({"gemm", Dtype::fp32, 3.3e7, 8e-4});
  p.measurements.push_back({"stream", Dtype::fp32, 1.28e8, 3.6e-3});
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
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1, "provenance": {}, "speed": 1})"), Catch::Contains("/speed"));
  CHECK_THAT(profile_error(R"({"fleetsim_profile": 1,)"), Catch::Contains("p.json"));
}

TEST_CASE("a profile replaces only the figures it names, on the types it names", "[calibrate]") {
  Scenario sc = load_scenario(test::source_dir() + "/scenarios/cpu-validate.json");
  const GpuType before = sc.cluster.groups[0].gpu;
  const LinkType nic_before = sc.cluster.groups[0].nic;
  CHECK(apply_profile(sc, example_profile()) == 3);  // the GPU type, and host-memcpy as GPU link and host link
  const GpuType& after = sc.cluster.groups[0].gpu;
  CHECK(after.peak_for(Dtype::fp32) == Approx(4.1e10));
  CHECK(after.peak_for(Dtype::fp64) == before.peak_for(Dtype::fp64));  // not in the profile
  CHECK(after.memory_bandwidth_Bps == Approx(3.5e10));
  CHECK(after.source == "calibrated: example.json");
  CHECK(sc.cluster.groups[0].gpu_link.bandwidth_Bps == Approx(1.2e10));
  CHECK(sc.cluster.groups[0].nic.bandwidth_Bps == nic_before.bandwidth_Bps);

  Scenario other = load_scenario(test::source_dir() + "/scenarios/default.json");
  CHECK(apply_profile(other, example_profile()) == 0);
}
