// Capacity planning: the cheapest cluster that meets a scenario's SLOs, today and at grown loads.
//
// A plan file names a base scenario and a search space (node types, a node-count range, fabrics,
// policies), the SLOs and the load-growth factors. Every (load, node type, fabric, policy) is a line
// of candidate clusters ordered by node count; more nodes never make the SLOs harder to meet, so each
// line is searched by bisection for its smallest passing count. A point runs several seeds and
// passes when the upper end of each SLO metric's 95% confidence interval is within its target and
// every workflow finished. A run whose queue grows past a bound stops early and fails. The cheapest
// passing point per load is re-simulated with fresh seeds before it is recommended.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleetsim/compare.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/cost.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {

struct PlanSpec {
  std::string file;
  std::string base;  // the base scenario's path, resolved against the plan file's folder
  std::vector<std::string> node_types;
  int min_nodes = 1, max_nodes = 1;
  std::vector<std::string> fabrics;       // fabric objects as JSON text; empty: the base's
  std::vector<std::string> policies;      // empty: the base's
  std::string slos;                       // an SLO array as JSON text; empty: the base's
  std::vector<double> load_growth{1.0};
  unsigned seeds = 3;
  unsigned confirm_seeds = 5;
  // A point not sure of an SLO (met on average, its 95% interval across the target) runs more seeds,
  // doubling, up to this many; 0: it is reported not sure with about how many seeds would settle it.
  unsigned settle_seeds = 0;
  std::uint64_t max_in_flight = 2000;     // workflows arrived and unfinished at which a run stops as diverging
  OwnershipCost cost;
};

PlanSpec load_plan(const std::string& path);
PlanSpec parse_plan(std::string_view json_text, const std::string& file_name, const std::string& base_dir);

// The scenario with its arrival rate multiplied by `factor`: Poisson, bursty and diurnal rates scale,
// periodic intervals and explicit times shrink, `once` counts and closed-loop users scale (rounded,
// at least 1). Workflows, cluster and everything else stay.
Scenario scale_load(Scenario scenario, double factor);

struct SloStats {
  std::string name;    // "latency_p95" or "tenant-a throughput"
  std::string metric;  // "latency_p95", "throughput", "attainment"...
  double target = 0;   // in the metric's unit
  bool at_least = false;
  MetricStats actual;
  // The 95% interval's end on the failing side: its lower end for throughput and attainment, upper for latency.
  double far_end() const { return at_least ? actual.mean - actual.ci95 : actual.mean + actual.ci95; }
  bool met_on_average() const { return at_least ? actual.mean >= target : actual.mean <= target; }
  bool surely_met() const { return at_least ? far_end() >= target : far_end() <= target; }
};

struct PlanPoint {
  double load = 1;
  std::string node_type;
  int nodes = 0;
  std::uint32_t gpus = 0;
  std::string fabric;  // the fabric's topology name, with its index in the search when there are several
  std::size_t fabric_index = 0;  // into PlanSpec::fabrics
  std::string policy;
  double monthly_usd = 0;  // what the plan ranks by: renting (every GPU 730 hours at the catalog's hourly price) or owning
  MonthlyCost cost;        // both ways, with owning's parts
  bool confirmation = false;  // a re-run of a recommended point with fresh seeds
  unsigned seeds = 0;  // 0: not run (a node type or count the workload does not fit)
  bool ran() const { return seeds > 0; }
  MetricStats p95_s, p99_s, mean_s, utilization;
  std::vector<SloStats> slos;
  bool passes = false;
  std::string verdict;  // "meets every SLO" or the first reason it does not
};

// The best a plan found for one node type: what a buyer weighing node types compares side by side.
struct PlanOption {
  std::string node_type;
  std::optional<std::size_t> point;    // its cheapest point that meets every SLO on its seeds, in `points`
  std::optional<std::size_t> closest;  // where none does: its point that ran with the lowest p95
};

struct PlanRecommendation {
  double load = 1;
  std::optional<std::size_t> point;      // the cheapest passing point, in `points`
  std::optional<std::size_t> confirmed;  // its confirmation run, in `points`
  std::vector<std::size_t> frontier;     // points on the Pareto frontier of monthly cost against p95 latency
  std::vector<PlanOption> per_node_type; // in the search's order of node types
};

struct PlanResult {
  std::vector<PlanPoint> points;  // every simulated point: by load, node type, fabric, policy, nodes; confirmations last
  std::vector<PlanRecommendation> loads;
  KernelGuesses kernel_guesses;
};

struct PlanOptions {
  unsigned threads = 0;     // 0: every core
  bool exhaustive = false;  // every node count of every line instead of bisection (a check of the search)
  std::function<void(std::size_t done, std::size_t estimated_total)> progress = {};
  // Several processes (MPI ranks): this one searches the lines whose index is `rank` modulo `ranks`;
  // `exchange` hands every process's text to every process, in rank order (an all-gather). Each then
  // holds every point, and the recommendations, computed alike everywhere, match a single process's.
  unsigned rank = 0, ranks = 1;
  std::function<std::vector<std::string>(const std::string& mine)> exchange = {};
  // A calibration profile applied to every candidate cluster, as `simulate --profile` applies it.
  const Profile* profile = nullptr;
};

PlanResult run_plan(const PlanSpec& spec, const PlanOptions& options = {});

}  // namespace fleetsim
