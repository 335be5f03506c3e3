// Capacity planning: the bisection finds what an exhaustive sweep finds, results do not depend on
// threads, load growth scales arrivals as stated, a run whose queue runs away stops early, and bad
// plan files are refused with the field named.
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>
#include <catch2/catch.hpp>
#include <set>
#include <map>

#include "fleetsim/error.hpp"
#include "fleetsim/plan.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

const std::string kScenarios = test::source_dir() + "/scenarios";

PlanSpec small_plan() {
  return parse_plan(R"({"base": "comfyui-studio.json",
      "search": {"node_types": ["hgx-h100-8", "l40s-pcie-8"], "nodes": {"min": 1, "max": 6}, "policies": ["memory-aware"]},
      "slos": [{"metric": "latency_p95", "target": "30 s"}],
      "load_growth": [1, 2], "seeds": 2, "confirm_seeds": 3})",
                    "small-plan.json", kScenarios);
}

std::string plan_error(const std::string& json) {
  try {
    parse_plan(json, "p.json", kScenarios);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The studio's base scenario with its graphs at absolute paths and each (old, new) text replaced,
// written as base.json into a fresh folder of the temporary directory, which is returned.
std::filesystem::path studio_base(const std::string& folder, const std::vector<std::pair<std::string, std::string>>& replacements) {
  std::string base = read_text_file(kScenarios + "/comfyui-studio.json");
  for (const char* graph : {"comfyui/sdxl-hires-fix.json", "comfyui/flux-dev.json"}) {
    base.replace(base.find(graph), std::string(graph).size(), kScenarios + "/" + graph);
  }
  for (const auto& [from, to] : replacements) {
    REQUIRE(base.find(from) != std::string::npos);
    base.replace(base.find(from), from.size(), to);
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / folder;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "base.json") << base;
  return dir;
}

}  // namespace

TEST_CASE("bisection finds the smallest passing cluster that an exhaustive sweep finds", "[plan]") {
  const PlanSpec spec = small_plan();
  const PlanResult fast = run_plan(spec, {.threads = 2});
  const PlanResult all = run_plan(spec, {.threads = 2, .exhaustive = true});
  // The exhaustive sweep also checks the premise: within a line, passing never turns into failing.
  std::map<std::tuple<double, std::string>, int> smallest;
  for (const PlanPoint& p : all.points) {
    if (p.confirmation) continue;
    auto key = std::make_tuple(p.load, p.node_type);
    if (p.passes && !smallest.contains(key)) smallest[key] = p.nodes;
    if (smallest.contains(key)) CHECK(p.passes);  // points come in node order within a line
  }
  for (const auto& [key, nodes] : smallest) {
    const auto found = std::find_if(fast.points.begin(), fast.points.end(), [&key = key, nodes = nodes](const PlanPoint& p) {
      return !p.confirmation && std::make_tuple(p.load, p.node_type) == key && p.passes && p.nodes == nodes;
    });
    CHECK(found != fast.points.end());
    for (const PlanPoint& p : fast.points) {
      if (!p.confirmation && std::make_tuple(p.load, p.node_type) == key && p.nodes < nodes) CHECK_FALSE(p.passes);
    }
  }
  REQUIRE(fast.loads.size() == 2);
  CHECK(fast.points.size() < all.points.size());
  for (std::size_t l = 0; l < 2; ++l) {
    REQUIRE(fast.loads[l].point.has_value());
    REQUIRE(all.loads[l].point.has_value());
    const PlanPoint &a = fast.points[*fast.loads[l].point], &b = all.points[*all.loads[l].point];
    CHECK(a.node_type == b.node_type);
    CHECK(a.nodes == b.nodes);
    CHECK(a.monthly_usd == b.monthly_usd);
    CHECK(fast.points[*fast.loads[l].confirmed].confirmation);
    CHECK(fast.points[*fast.loads[l].confirmed].passes);
  }
  // Twice the load needs at least as much hardware.
  CHECK(fast.points[*fast.loads[1].point].monthly_usd >= fast.points[*fast.loads[0].point].monthly_usd);
}

TEST_CASE("a plan is the same on one thread and on four", "[plan]") {
  const PlanSpec spec = small_plan();
  CHECK(plan_json(spec, run_plan(spec, {.threads = 1})) == plan_json(spec, run_plan(spec, {.threads = 4})));
}

TEST_CASE("the Pareto frontier holds only points no other point beats on both cost and p95, each beyond the intervals", "[plan]") {
  // The shipped studio plan has configurations a few microseconds apart (two policies, more nodes than
  // the load needs): only one of each may be on the frontier.
#ifdef FLEETSIM_SANITIZED
  // The shipped plan's exhaustive run costs two minutes under the sanitizers: the small plan's walks the same code.
  const PlanSpec spec = small_plan();
#else
  const PlanSpec spec = GENERATE(small_plan(), load_plan(kScenarios + "/plans/comfyui-studio.json"));
#endif
  const PlanResult r = run_plan(spec, {.threads = 2, .exhaustive = true});
  for (const PlanRecommendation& rec : r.loads) {
    REQUIRE_FALSE(rec.frontier.empty());
    for (std::size_t i : rec.frontier) {
      // No failing point is offered as a trade-off, however cheap.
      CHECK(r.points[i].passes);
      for (const PlanPoint& q : r.points) {
        if (q.load != rec.load || q.confirmation || !q.ran() || !q.passes) continue;
        const PlanPoint& p = r.points[i];
        CHECK_FALSE((q.monthly_usd < p.monthly_usd && q.p95_s.mean <= p.p95_s.mean));
      }
    }
    // Each dearer frontier point is faster beyond both intervals: no noise offered as a trade-off.
    for (std::size_t k = 1; k < rec.frontier.size(); ++k) {
      const PlanPoint &cheaper = r.points[rec.frontier[k - 1]], &dearer = r.points[rec.frontier[k]];
      CHECK(dearer.p95_s.mean + dearer.p95_s.ci95 < cheaper.p95_s.mean - cheaper.p95_s.ci95);
      CHECK(dearer.p95_s.mean < 0.99 * cheaper.p95_s.mean);
    }
  }
}

TEST_CASE("a node type the workload cannot run on fails its lines with the reason", "[plan]") {
  PlanSpec spec = small_plan();
  spec.node_types = {"rtx4090-pcie-8", "hgx-h100-8"};
  spec.load_growth = {1};
  const PlanResult r = run_plan(spec, {.threads = 1});
  const auto rtx = std::find_if(r.points.begin(), r.points.end(), [](const PlanPoint& p) { return p.node_type == "rtx4090-pcie-8"; });
  REQUIRE(rtx != r.points.end());
  CHECK_FALSE(rtx->passes);
  CHECK_THAT(rtx->verdict, Catch::Contains("cannot run") && Catch::Contains("VRAM"));
  CHECK(r.points[*r.loads[0].point].node_type == "hgx-h100-8");
  // Only impossible lines: the plan itself is wrong.
  spec.node_types = {"rtx4090-pcie-8"};
  CHECK_THROWS_AS(run_plan(spec, {.threads = 1}), InputError);
}

TEST_CASE("load growth scales each arrival process as stated", "[plan]") {
  const Scenario sc = test::unit_scenario(R"("horizon": "1000 s", "cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "0.5 /s"}},
                   {"workflow": "w", "arrival": {"process": "periodic", "interval": "10 s"}},
                   {"workflow": "w", "arrival": {"process": "once", "count": 3}},
                   {"workflow": "w", "arrival": {"process": "times", "times": ["10 s", "20 s"]}}])");
  const Scenario twice = scale_load(sc, 2);
  CHECK(twice.streams[0].arrival.rate_per_s == Approx(1.0));
  CHECK(twice.streams[1].arrival.interval_s == Approx(5.0));
  CHECK(twice.streams[2].arrival.count == 6);
  CHECK(twice.streams[3].arrival.times_s[1] == Approx(10.0));
  const auto before = simulate(sc).summary.workflows.submitted, after = simulate(twice).summary.workflows.submitted;
  // Poisson: about 500 then 1000; periodic 101 then 201; once 3 then 6; times 2 and 2.
  CHECK(static_cast<double>(after) / static_cast<double>(before) == Approx(2.0).epsilon(0.08));
}

TEST_CASE("a run whose queue grows without bound stops early as diverged", "[plan][simulation]") {
  // One GPU, 1-s tasks arriving at 2 /s: the queue grows by about one task a second.
  const Scenario sc = test::unit_scenario(R"("horizon": "2000 s", "cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "2 /s"}}])");
  const Summary stopped = simulate(sc, {.max_in_flight = 100}).summary;
  CHECK(stopped.diverged);
  CHECK_FALSE(stopped.horizon_reached);
  CHECK(stopped.end_s < 300);  // about 100 s; far before the horizon
  CHECK(stopped.workflows.running + stopped.workflows.queued > 100);
  const Summary full = simulate(sc).summary;
  CHECK_FALSE(full.diverged);
  CHECK(full.horizon_reached);
}

TEST_CASE("a point not sure of an SLO says about how many seeds would settle it, and runs them when asked", "[plan]") {
  // t(N - 1) sd / sqrt(N) under the gap: with sd 1 and a gap of 1, N = 7 (2.447 / 2.646 = 0.92; N = 6 gives 1.05).
  CHECK(seeds_to_settle(1.0, 1.0, 2) == 7);
  CHECK(seeds_to_settle(1.0, 1.0, 9) == 10);  // never fewer than one more than it has
  CHECK(seeds_to_settle(0.0, 1.0, 2) == 0);
  const auto plan = [](const std::string& settle) {
    return parse_plan(R"({"base": "comfyui-studio.json",
        "search": {"node_types": ["hgx-h100-8", "l40s-pcie-8"], "nodes": {"min": 1, "max": 6}, "policies": ["memory-aware"]},
        "slos": [{"metric": "latency_p95", "target": "30 s"}], "seeds": 2, "confirm_seeds": 3)" + settle + "}",
                      "settle-plan.json", kScenarios);
  };
  const PlanResult plain = run_plan(plan(""), {.threads = 2});
  const PlanResult settled = run_plan(plan(R"(, "settle_seeds": 16)"), {.threads = 2});
  int unsure = 0;
  for (const PlanPoint& p : plain.points) {
    // Its own seeds' verdict (not a confirmation's failure quoted on the point it confirmed).
    if (p.verdict.find("interval reaches") == std::string::npos || p.verdict.rfind("met every SLO on its seeds", 0) == 0) continue;
    ++unsure;
    CHECK_THAT(p.verdict, Catch::Contains("over " + std::to_string(p.seeds) + " seeds (about ") && Catch::Contains("seeds would settle it)"));
    // Asked to settle, the same point ran more seeds, until sure or at the cap.
    for (const PlanPoint& q : settled.points) {
      if (q.node_type != p.node_type || q.nodes != p.nodes || q.confirmation != p.confirmation) continue;
      CHECK(q.seeds > p.seeds);
      if (q.verdict.find("interval reaches") != std::string::npos) CHECK(q.seeds == 16);
    }
  }
  CHECK(unsure > 0);
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"]}, "seeds": 4, "settle_seeds": 4})"),
             Catch::Contains("p.json: /settle_seeds: expected more than \"seeds\" (4), or 0 for none"));
}

TEST_CASE("malformed plan files are refused with the field named", "[plan]") {
  const std::string search = R"("search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}})";
  CHECK(plan_error(R"({"base": "comfyui-studio.json", )" + search + "}").empty());
  CHECK_THAT(plan_error(R"({"base": "nowhere.json", )" + search + "}"), Catch::Contains("p.json: /base: expected a scenario file"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["dgx-9000"], "nodes": {"min": 1, "max": 2}}})"),
             Catch::Contains("/search/node_types/0: unknown node type \"dgx-9000\""));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8", "hgx-h100-8"], "nodes": {"min": 1, "max": 2}}})"),
             Catch::Contains("/search/node_types/1: \"hgx-h100-8\" is listed twice"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 3, "max": 2}}})"),
             Catch::Contains("/search/nodes/max: expected at least min"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}, "policies": ["lottery"]}})"),
             Catch::Contains("/search/policies/0: unknown policy \"lottery\""));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", )" + search + R"(, "load_growth": [1, -2]})"), Catch::Contains("/load_growth/1"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", )" + search + R"(, "budget": 5})"), Catch::Contains("/budget"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json"})"), Catch::Contains("/search"));
}

TEST_CASE("throughput and attainment SLOs are evaluated as defined", "[plan][slo]") {
  // Ten 1-s tasks on one GPU at t = 0 finish at 1, 2, ..., 10 s.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "tenants": [{"name": "a"}],
      "workload": [{"tenant": "a", "workflow": "w", "arrival": {"process": "once", "count": 10}}],
      "slos": [{"metric": "throughput", "target": "1 /s"},
               {"tenant": "a", "metric": "throughput", "target": "1.1 /s"},
               {"metric": "attainment", "within": "5.5 s", "target": 0.5},
               {"metric": "attainment", "within": "5.5 s", "target": 0.6},
               {"metric": "latency_p95", "target": "9.5 s"}])");
  const Summary s = simulate(sc).summary;
  REQUIRE(s.slos.size() == 5);
  CHECK(s.slos[0].actual == Approx(1.0));  // 10 workflows in 10 s
  CHECK(s.slos[0].met);
  CHECK_FALSE(s.slos[1].met);
  CHECK(s.slos[2].actual == Approx(0.5));  // 5 of 10 within 5.5 s
  CHECK(s.slos[2].met);
  CHECK_FALSE(s.slos[3].met);
  CHECK(s.slos[4].actual == Approx(9.55));  // type-7 p95 of 1..10
  CHECK_FALSE(s.slos[4].met);
}

TEST_CASE("malformed SLOs are refused with the field named", "[slo]") {
  const auto error = [](const std::string& body) {
    try {
      test::unit_scenario(body);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string head = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}], )";
  CHECK_THAT(error(head + R"("slos": [{"metric": "attainment", "target": 0.9}])"), Catch::Contains("/slos/0/within"));
  CHECK_THAT(error(head + R"("slos": [{"metric": "attainment", "within": "1 s", "target": 1.5}])"), Catch::Contains("/slos/0/target"));
  CHECK_THAT(error(head + R"("slos": [{"metric": "throughput", "target": "3 s"}])"), Catch::Contains("/slos/0/target"));
  CHECK_THAT(error(head + R"("slos": [{"metric": "goodput", "target": "3 s"}])"), Catch::Contains("/slos/0/metric"));
}

TEST_CASE("candidates keep the base's settings for their node type, and a profile applies to every one", "[plan]") {
  // The studio's base with its H100s derated to a quarter of their compute: the same plan must buy more.
  const std::filesystem::path dir = studio_base("fleetsim-plan-derated", {{R"("nodes": [{"type": "hgx-h100-8", "count": 1}])",
      R"("nodes": [{"type": "hgx-h100-8", "count": 1, "gpu_overrides": {"peak_flops": {"bf16": "247 TFLOP/s", "fp16": "247 TFLOP/s"}}}])"}});
  const std::string search = R"("search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 8}}, "seeds": 2, "confirm_seeds": 2})";
  const PlanResult plain = run_plan(parse_plan(R"({"base": "comfyui-studio.json", )" + search, "p.json", kScenarios), {.threads = 2});
  const PlanResult derated = run_plan(parse_plan(R"({"base": "base.json", )" + search, "p.json", dir.string()), {.threads = 2});
  auto recommended = [](const PlanResult& r) {
    REQUIRE(r.loads.size() == 1);
    REQUIRE(r.loads[0].point);
    return r.points[*r.loads[0].point].nodes;
  };
  INFO("plain " << recommended(plain) << ", derated " << recommended(derated));
  CHECK(recommended(derated) > recommended(plain));

  // The same derating as a calibration profile, given to the plan instead of written in the base.
  const Profile profile = parse_profile(R"({"fleetsim_profile": 1, "provenance": {"backend": "cuda"},
      "gpus": {"h100-sxm": {"kernel_compute_scale": 0.25}}})", "slow.json");
  const PlanResult profiled = run_plan(parse_plan(R"({"base": "comfyui-studio.json", )" + search, "p.json", kScenarios), {.threads = 2, .profile = &profile});
  CHECK(recommended(profiled) > recommended(plain));
  std::filesystem::remove_all(dir);
}

TEST_CASE("open arrivals up to the horizon leave work in flight, which fails a point only if the queue grows", "[plan]") {
  const std::filesystem::path dir = studio_base("fleetsim-plan-open", {{R"(, "count": 400)", ""}, {R"(, "count": 200)", ""},
                                                                        {R"("horizon": "1 h")", R"("horizon": "10 min")"}});
  const PlanResult r = run_plan(parse_plan(R"({"base": "base.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 6}},
      "seeds": 2, "confirm_seeds": 2})", "p.json", dir.string()), {.threads = 2, .exhaustive = true});
  bool some_pass = false, some_fail = false;
  for (const PlanPoint& p : r.points) {
    INFO(p.nodes << " nodes: " << p.verdict);
    if (p.passes) CHECK(p.verdict.find("unfinished") == std::string::npos);
    some_pass = some_pass || p.passes;
    some_fail = some_fail || !p.passes;
  }
  CHECK(some_pass);  // every point used to fail with "workflows unfinished at the horizon"
  CHECK(some_fail);  // one node cannot keep up: its queue grows
  std::filesystem::remove_all(dir);
}

TEST_CASE("each node type's best stands beside the recommendation: its cheapest passing point, or the closest, or none", "[plan]") {
  PlanSpec spec = small_plan();
  spec.node_types = {"hgx-h100-8", "l40s-pcie-8", "rtx4090-pcie-8"};
  spec.load_growth = {1};
  const PlanResult r = run_plan(spec, {.threads = 1, .exhaustive = true});
  REQUIRE(r.loads.size() == 1);
  const PlanRecommendation& rec = r.loads[0];
  REQUIRE(rec.per_node_type.size() == 3);
  for (const PlanOption& o : rec.per_node_type) {
    // Every point of the type that ran: the option's point is the cheapest passing one, or none passes and
    // the closest has the lowest p95.
    double cheapest = 1e300, lowest_p95 = 1e300;
    bool any_ran = false;
    for (const PlanPoint& p : r.points) {
      if (p.node_type != o.node_type || p.confirmation || !p.ran()) continue;
      any_ran = true;
      if (p.passes) cheapest = std::min(cheapest, p.monthly_usd);
      lowest_p95 = std::min(lowest_p95, p.p95_s.mean);
    }
    if (o.point) {
      CHECK(r.points[*o.point].passes);
      CHECK(r.points[*o.point].monthly_usd == cheapest);
      CHECK_FALSE(o.closest);
    } else if (any_ran) {
      CHECK(cheapest == 1e300);
      REQUIRE(o.closest);
      CHECK(r.points[*o.closest].p95_s.mean == lowest_p95);
    } else {
      CHECK_FALSE(o.closest);
    }
  }
  // The recommendation is its node type's best (a cheaper point of that type that failed its confirmation no
  // longer passes).
  REQUIRE(rec.point);
  const auto same_type = std::find_if(rec.per_node_type.begin(), rec.per_node_type.end(),
                                      [&](const PlanOption& o) { return o.node_type == r.points[*rec.point].node_type; });
  REQUIRE(same_type != rec.per_node_type.end());
  CHECK(same_type->point == rec.point);
  CHECK_FALSE(rec.per_node_type[2].point);          // FLUX's weights fit no RTX 4090
  CHECK_FALSE(rec.per_node_type[2].closest);
  // The text says each, and which is the recommendation.
  std::ostringstream text;
  write_plan_text(text, spec, r);
  CHECK_THAT(text.str(), Catch::Contains("load 1x, the cheapest that meets every SLO per node type:") && Catch::Contains("the recommendation") &&
                             Catch::Contains("rtx4090-pcie-8   cannot run the workload"));
  // The L40S runs the graphs on Ampere's kernel constants: said beside its numbers and below, and in the JSON; the H100's
  // were fitted on it; the RTX 4090, as borrowed, has no times to qualify.
  REQUIRE(r.kernel_guesses.size() == 1);
  CHECK(r.kernel_guesses[0].first == "l40s-pcie-8");
  CHECK_THAT(r.kernel_guesses[0].second, Catch::StartsWith("l40s (ada): Ampere's"));
  CHECK(kernel_guess(r.kernel_guesses, "hgx-h100-8") == nullptr);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  l40s-pcie-8    ")) CHECK(line.ends_with(" (kernel constants a guess: below)"));
    if (line.starts_with("  hgx-h100-8    ")) CHECK(line.find("guess") == std::string::npos);
    if (line.starts_with("load 1x, overall: ")) CHECK((line.find("l40s") == std::string::npos) == (line.find("guess") == std::string::npos));
  }
  CHECK_THAT(text.str(), Catch::Contains("node types whose GPU's kernel constants are a guess") && Catch::Contains("  l40s-pcie-8: l40s (ada): Ampere's"));
  CHECK_THAT(plan_json(spec, r), Catch::Contains(R"("node_type": "l40s-pcie-8")") && Catch::Contains(R"("why": "l40s (ada): Ampere's)"));
  CHECK(kernel_guess(r.kernel_guesses, "rtx4090-pcie-8") == nullptr);
}

TEST_CASE("owning a cluster costs its purchase over its years, the energy it draws at its utilization and the space it is provisioned, by hand", "[plan][cost]") {
  OwnershipCost cost;  // the documented defaults: 5 years, PUE 1.58, $0.0806/kWh, $184.06 a kW-month
  const ClusterSpec two = cluster_of("hgx-h100-8", 2);
  const MonthlyCost m = monthly_cost(cost, two, 0.5);
  // Purchase: two $296,644 servers over 60 months.
  CHECK(m.capital_usd == Approx(2 * 296644.0 / 60).epsilon(1e-12));
  // Energy: 8 GPUs between idle and 700 W at half their time busy, and the rest of the 10.2 kW system at its
  // share of the maximum, 730 hours at PUE 1.58 and $0.0806/kWh.
  const GpuType& h100 = *Catalog::builtin().gpu("h100-sxm");
  const double node_w = 8 * (h100.idle_power_w + 0.5 * (700 - h100.idle_power_w)) + (10200 - 8 * 700);
  CHECK(m.energy_usd == Approx(2 * node_w / 1000 * 730 * 1.58 * 0.0806).epsilon(1e-12));
  // Colocation by the kilowatt provisioned: 2 x 10.2 kW.
  CHECK(m.space_usd == Approx(2 * 10.2 * 184.06).epsilon(1e-12));
  CHECK(m.own_usd == Approx(m.capital_usd + m.energy_usd + m.space_usd).epsilon(1e-12));
  CHECK(m.rent_usd == two.usd_per_month());
  CHECK_FALSE(m.purchase_estimated);
  CHECK_FALSE(m.power_estimated);
  // Busier GPUs draw more.
  CHECK(monthly_cost(cost, two, 0.9).energy_usd > m.energy_usd);
  // A node type with card prices only: the cards times 1.64 (Epoch AI's server-to-GPU cost ratio), its power
  // 1.5 times its GPUs' TDP; both said to be estimates.
  const MonthlyCost pcie = monthly_cost(cost, cluster_of("h100-pcie-2", 1), 0.5);
  CHECK(pcie.capital_usd == Approx(1.64 * 2 * 24500 / 60).epsilon(1e-12));
  CHECK(pcie.purchase_estimated);
  CHECK(pcie.power_estimated);
  CHECK(pcie.space_usd == Approx(1.5 * 2 * Catalog::builtin().gpu("h100-pcie")->tdp_w / 1000 * 184.06).epsilon(1e-12));
  // No price at all (L40S): owning is not priced; a plan file's price fills it.
  CHECK(monthly_cost(cost, cluster_of("l40s-pcie-8", 1), 0.5).own_usd == 0);
  cost.nodes.push_back({"l40s-pcie-8", {.purchase_usd = 90000, .system_power_w = 3000}});
  const MonthlyCost l40s = monthly_cost(cost, cluster_of("l40s-pcie-8", 1), 0.5);
  CHECK(l40s.capital_usd == Approx(90000.0 / 60).epsilon(1e-12));
  CHECK(l40s.space_usd == Approx(3 * 184.06).epsilon(1e-12));
}

TEST_CASE("a plan rents reserved or spot only at the discount its file quotes, and ranks by it when asked", "[plan][cost]") {
  OwnershipCost cost;
  const ClusterSpec two = cluster_of("hgx-h100-8", 2);
  CHECK(monthly_cost(cost, two, 0.5).reserved_usd == 0);  // none quoted: none shown
  CHECK(monthly_cost(cost, two, 0.5).spot_usd == 0);
  cost.reserved_discount = 0.4;
  cost.spot_discount = 0.7;
  const MonthlyCost m = monthly_cost(cost, two, 0.5);
  CHECK(m.reserved_usd == Approx(0.6 * two.usd_per_month()).epsilon(1e-12));
  CHECK(m.spot_usd == Approx(0.3 * two.usd_per_month()).epsilon(1e-12));
  CHECK(m.ranked_usd(cost) == m.rent_usd);
  cost.basis = OwnershipCost::Basis::reserved;
  CHECK(m.ranked_usd(cost) == m.reserved_usd);
  cost.basis = OwnershipCost::Basis::spot;
  CHECK(m.ranked_usd(cost) == m.spot_usd);

  const std::string search = R"("search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 3}, "policies": ["memory-aware"]},
      "slos": [{"metric": "latency_p95", "target": "30 s"}], "seeds": 2, "confirm_seeds": 2)";
  const PlanSpec reserved = parse_plan(R"({"base": "comfyui-studio.json", )" + search + R"(, "cost": {"basis": "reserved", "reserved_discount": 0.35, "spot_discount": 0.6}})",
                                       "reserved.json", kScenarios);
  const PlanResult r = run_plan(reserved, {.threads = 2});
  REQUIRE_FALSE(r.points.empty());
  for (const PlanPoint& p : r.points) {
    CHECK(p.monthly_usd == Approx(0.65 * cluster_of(p.node_type, p.nodes).usd_per_month()).epsilon(1e-12));
    CHECK(p.cost.spot_usd == Approx(0.4 * p.cost.rent_usd).epsilon(1e-12));
  }
  std::ostringstream text;
  write_plan_text(text, reserved, r);
  CHECK_THAT(text.str(), Catch::Contains("costs ranked by renting reserved (on demand 35% off, as quoted)") && Catch::Contains(", reserved $") &&
                             Catch::Contains(", spot $") && Catch::Contains("preemptions only where the scenario models them"));
  CHECK_THAT(plan_json(reserved, r), Catch::Contains("\"basis\": \"reserved\"") && Catch::Contains("\"reserved_usd\"") && Catch::Contains("\"spot_discount\": 0.6"));
  // Refused: a reserved or spot basis with no quote, a discount of 100% or more.
  const std::string one_node = R"("base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}})";
  CHECK_THAT(plan_error("{" + one_node + R"(, "cost": {"basis": "spot"}})"),
             Catch::Contains("/cost/spot_discount: required beside \"basis\": the fraction off the on-demand price"));
  CHECK_THAT(plan_error("{" + one_node + R"(, "cost": {"basis": "spot", "spot_discount": 0}})"), Catch::Contains("/cost/spot_discount: expected above 0"));
  const std::string whole = plan_error("{" + one_node + R"(, "cost": {"basis": "reserved", "reserved_discount": 1}})");
  CHECK_THAT(whole, Catch::Contains("/cost/reserved_discount") && !Catch::Contains("required beside") && !Catch::Contains("above 0"));
}

TEST_CASE("a plan that owns ranks by owning, says both costs, and refuses a node type it cannot price", "[plan][cost]") {
  const std::string search = R"("search": {"node_types": ["hgx-h100-8", "h100-pcie-2"], "nodes": {"min": 1, "max": 8}, "policies": ["memory-aware"]},
      "slos": [{"metric": "latency_p95", "target": "30 s"}], "seeds": 2, "confirm_seeds": 2)";
  const PlanSpec own = parse_plan(R"({"base": "comfyui-studio.json", )" + search + R"(, "cost": {"basis": "own", "years": 4}})", "own.json", kScenarios);
  CHECK(own.cost.basis == OwnershipCost::Basis::own);
  CHECK(own.cost.years == 4);
  const PlanResult r = run_plan(own, {.threads = 2});
  for (const PlanPoint& p : r.points) {
    CHECK(p.monthly_usd == p.cost.own_usd);
    CHECK(p.cost.rent_usd == cluster_of(p.node_type, p.nodes).usd_per_month());
  }
  REQUIRE(r.loads.front().point.has_value());
  std::ostringstream text;
  write_plan_text(text, own, r);
  CHECK_THAT(text.str(), Catch::Contains("costs ranked by owning") && Catch::Contains("owning $") && Catch::Contains("; renting $"));
  CHECK_THAT(plan_json(own, r), Catch::Contains("\"own_usd\"") && Catch::Contains("\"basis\": \"own\""));
  // Refused: a node type with no price, a basis that is neither, an unknown node type's price.
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["l40s-pcie-8"], "nodes": {"min": 1, "max": 2}}, "cost": {"basis": "own"}})"),
             Catch::Contains("p.json: /search/node_types/0: no purchase price for \"l40s-pcie-8\""));
  CHECK(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["l40s-pcie-8"], "nodes": {"min": 1, "max": 2}},
      "cost": {"basis": "own", "nodes": {"l40s-pcie-8": {"purchase_usd": 90000, "system_power": "3 kW"}}}})").empty());
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}}, "cost": {"basis": "buy"}})"),
             Catch::Contains("/cost/basis"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}}, "cost": {"pue": 0.5}})"),
             Catch::Contains("/cost/pue"));
  CHECK_THAT(plan_error(R"({"base": "comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}},
      "cost": {"nodes": {"hgx-h100-9": {"purchase_usd": 1}}}})"), Catch::Contains("/cost/nodes/hgx-h100-9: unknown node type"));
  // Without "cost" a plan rents, as before, and says nothing of owning.
  const PlanResult rent = run_plan(small_plan(), {.threads = 2});
  std::ostringstream plain;
  write_plan_text(plain, small_plan(), rent);
  CHECK_THAT(plain.str(), !Catch::Contains("owning"));
}

TEST_CASE("the plan page's cost axis turns logarithmic where costs spread over more than twenty times", "[plan][report]") {
  const PlanSpec spec = parse_plan(R"({"base": "comfyui-studio.json",
      "search": {"node_types": ["hgx-h100-8", "l40s-pcie-8"], "nodes": {"min": 1, "max": 8}, "policies": ["memory-aware"]},
      "slos": [{"metric": "latency_p95", "target": "30 s"}], "seeds": 2, "confirm_seeds": 2})",
                                   "wide.json", kScenarios);
  const PlanResult r = run_plan(spec, {.threads = 2, .exhaustive = true});
  double lo = 1e300, hi = 0;
  for (const PlanPoint& p : r.points) {
    if (p.confirmation || p.monthly_usd <= 0) continue;
    lo = std::min(lo, p.monthly_usd);
    hi = std::max(hi, p.monthly_usd);
  }
  REQUIRE(hi / lo > 20);  // one L40S node to eight HGX H100s
  std::ostringstream page;
  write_plan_html(page, spec, r);
  CHECK_THAT(page.str(), Catch::Contains("monthly cost (log scale)"));
  // Ticks at 1, 2 and 5 of each decade, in dollars.
  CHECK_THAT(page.str(), Catch::Contains(">$10,000<") && Catch::Contains(">$20,000<") && Catch::Contains(">$50,000<"));
  // A colour a node type, the same on every point of it, and the legend says which.
  const std::string html = page.str();
  std::map<std::string, std::set<std::string>> colors;  // node type -> the stroke colours of its points
  for (std::size_t at = html.find("<circle class=\"mark\""); at != std::string::npos; at = html.find("<circle class=\"mark\"", at + 1)) {
    const std::size_t stroke = html.find("stroke=\"", at) + 8, title = html.find("<title>", at);
    const std::string tooltip = html.substr(title, html.find("</title>", title) - title);
    for (const char* type : {"hgx-h100-8", "l40s-pcie-8"}) {
      if (tooltip.find(type) != std::string::npos) colors[type].insert(html.substr(stroke, html.find('"', stroke) - stroke));
    }
  }
  REQUIRE(colors.size() == 2);
  CHECK(colors["hgx-h100-8"].size() == 1);
  CHECK(colors["l40s-pcie-8"].size() == 1);
  CHECK(*colors["hgx-h100-8"].begin() != *colors["l40s-pcie-8"].begin());
  CHECK_THAT(html, Catch::Contains("Pareto frontier") && Catch::Contains(">l40s-pcie-8<"));
  // A plan over one node type and one or two nodes stays linear.
  const PlanSpec narrow = parse_plan(R"({"base": "comfyui-studio.json",
      "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 1, "max": 2}, "policies": ["memory-aware"]},
      "slos": [{"metric": "latency_p95", "target": "30 s"}], "seeds": 2, "confirm_seeds": 2})",
                                     "narrow.json", kScenarios);
  std::ostringstream linear;
  write_plan_html(linear, narrow, run_plan(narrow, {.threads = 2, .exhaustive = true}));
  CHECK_THAT(linear.str(), Catch::Contains(">monthly cost<") && !Catch::Contains("log scale"));
}
