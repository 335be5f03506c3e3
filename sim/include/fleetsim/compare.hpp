// Runs one scenario under several policies and seeds, in parallel on local cores, and condenses
// each metric to a mean with a 95% confidence interval (Student's t over the seeds), and each policy
// against a baseline to a verdict per metric.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"

namespace fleetsim {

struct MetricStats {
  double mean = 0;
  double ci95 = 0;  // half-width; 0 with a single seed
  double sd = 0;    // sample standard deviation (n - 1); 0 with a single seed
};

// Mean and 95% confidence half-width of a sample.
MetricStats mean_ci95(const std::vector<double>& values);
// About how many seeds would bring the 95% half-width of a mean under `gap` (a difference from 0 or
// from a target), if the sample's standard deviation held: the fewest N above `have` with
// t(N - 1) sd / sqrt(N) < gap; 0 past 10,000.
unsigned seeds_to_settle(double sd, double gap, std::size_t have);

// A difference's 95% interval from a paired bootstrap over the workflow instances of one run each.
struct InstanceInterval {
  std::string metric;  // "latency mean", "latency p95", "latency p99"
  double low = 0, high = 0;
  std::size_t instances = 0;  // instances resampled (those either run measured)
};

struct PolicyRuns {
  std::string policy;
  std::vector<Summary> runs;  // one per seed, in seed order
  // Per run: each workflow instance's latency in instance order, NaN where the run did not measure one
  // (measured_latency); for the distributions, and the bootstrap below.
  std::vector<std::vector<double>> latencies = {};
  // The first run's ready tasks waiting for GPUs over its time, averaged in bins: (bin middle, tasks).
  std::vector<std::pair<double, double>> waiting = {};
  // One run each (a scenario that draws nothing at random, a trace replay): each latency metric's
  // difference from the baseline's run, its interval from resampling the workflow instances, paired
  // (an instance drawn is drawn in both runs). Seeds cannot tell such runs apart; the instances can say
  // whether a difference rests on many of them or on a few.
  std::vector<InstanceInterval> instance_intervals = {};
  bool seeds_repeat = false;  // the scenario draws nothing at random: every seed would repeat the run
};

// The paired bootstrap: `resamples` draws of the instances with replacement (from a stream of its own,
// so the same runs give the same interval), each giving the statistic's difference (other - base) over
// the instances each run measured (NaN: not measured); the 2.5th and 97.5th percentiles of the draws.
// `statistic` is "latency mean" or "latency pNN". A draw in which one run measured none of the instances
// drawn is left out; with none left, `instances` is 0 (no interval).
InstanceInterval bootstrap_difference(const std::vector<double>& base, const std::vector<double>& other, const std::string& statistic,
                                      unsigned resamples = 1000);

// The metrics a comparison reports, by name, in order: each reads one number from a summary.
struct ComparedMetric {
  std::string name;
  std::string unit;  // "s", "%", "" ...
  std::function<double(const Summary&)> read;
};
// The cluster's metrics, then, where the scenario has several tenants, each tenant's p95 latency and
// mean task wait (the tenants of `example`, any summary of the scenario).
std::vector<ComparedMetric> compared_metrics(const Summary& example);
// Those of the runs compared (the cluster's alone when there are none), without the rows that mean nothing for
// them: `SLOs met` when the scenario sets no SLOs, the weight-load rows when no run loaded weights, VRAM when
// no run held any.
std::vector<ComparedMetric> compared_metrics(const std::vector<PolicyRuns>& results);

// How one policy's runs compare with a baseline's on a metric where lower is better, paired by seed: run k
// of each has the same seed, so the same arrivals and draws (common random numbers), and the differences
// of the pairs carry less noise than the two means do apart.
struct MetricVerdict {
  enum class Call { same, lower, higher, not_sure };
  std::string metric;    // a ComparedMetric's name
  std::string unit;
  double baseline = 0;   // mean over the seeds
  double value = 0;      // mean over the seeds
  double difference = 0; // mean of the paired differences, value - baseline
  double ci95 = 0;       // its 95% half-width (Student's t); 0 with one run
  // One run each: the instances' bootstrap interval of the difference, where the metric has one.
  std::optional<InstanceInterval> interval = {};
  Call call = Call::same;
  // For a call not yet sure: about how many seeds would make the interval exclude no change, if the mean
  // difference held (the half-width shrinks with the square root of the seeds); 0 when none would tell.
  unsigned seeds_to_settle = 0;
};
struct PolicyVerdict {
  std::string policy;
  std::string baseline;
  std::size_t runs = 0;  // seeds per policy; 1 where the scenario draws nothing at random
  bool seeds_repeat = false;  // and so more seeds would only repeat the run
  std::vector<MetricVerdict> metrics;  // makespan, latency mean, p95, p99, cost, where a run measured them
};
// Each policy against the baseline (`fifo` when it is among them, else the first), on the metrics where
// lower is better; the baseline itself has no verdict.
std::vector<PolicyVerdict> compare_verdicts(const std::vector<PolicyRuns>& results);
std::size_t compare_baseline(const std::vector<PolicyRuns>& results);

// Several processes (MPI ranks) share a comparison: this one simulates the runs whose index (policy by policy,
// seed by seed) is `rank` modulo `ranks`, and `exchange` hands every process's text to every process, in rank
// order (an all-gather). Each then holds every run as one process would, bit for bit: the instances' latencies,
// the queue over time, and of each summary what a comparison reads (its metrics, the SLOs its pages draw as
// targets, the run's end); the rest of a summary stays on the rank that ran it.
struct CompareRanks {
  unsigned rank = 0, ranks = 1;
  std::function<std::vector<std::string>(const std::string& mine)> exchange = {};
};

// Each name's registry entry, in order; unknown names are an InputError (of `--policies`) listing the valid ones.
std::vector<const PolicyInfo*> find_policies(const std::vector<std::string>& names);

// The scenario under `policy`: its own policy keeps its parameters, any other runs with its defaults.
Scenario with_policy(Scenario scenario, const PolicyInfo& policy);

// Every policy with its registry defaults, except the scenario's own, which keeps its parameters
// (unknown names are an InputError listing the valid ones); seeds scenario.seed, scenario.seed + 1,
// ..., or one run each where the scenario draws nothing at random (seed_use), since every seed would
// repeat it; then each latency metric's instance_intervals against the baseline. `progress` is called
// after each run (of this rank's, over several).
std::vector<PolicyRuns> compare_policies(const Scenario& scenario, const std::vector<std::string>& policies,
                                         unsigned seeds, unsigned threads,
                                         const std::function<void(std::size_t done, std::size_t total)>& progress = {},
                                         const CompareRanks& ranks = {});

}  // namespace fleetsim
