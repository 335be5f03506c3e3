#include "fleetsim/compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "fleetsim/error.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/time_bins.hpp"
#include "parallel.hpp"
#include "fleetsim/suggest.hpp"

namespace fleetsim {

namespace {

// The two-sided 95% quantile of Student's t for `df` degrees of freedom (1..30); the normal's beyond.
double t95(std::size_t df) {
  static constexpr double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  return df >= 1 && df <= 30 ? t[df - 1] : 1.960;
}

// What ranks exchange of a run, exact: a double as the shortest text that reads back the same, and one
// that JSON cannot hold (NaN: an instance not measured; an infinity) as a string.
using Json = nlohmann::json;

Json exact(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}
double exact_from(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string text = j.get<std::string>();
  return text == "nan" ? std::numeric_limits<double>::quiet_NaN() : text == "inf" ? HUGE_VAL : -HUGE_VAL;
}
Json exact(const std::vector<double>& values) {
  Json out = Json::array();
  for (double x : values) out.push_back(exact(x));
  return out;
}
std::vector<double> exact_list(const Json& j) {
  std::vector<double> out;
  for (const Json& x : j) out.push_back(exact_from(x));
  return out;
}

Json counts_json(const Counts& c) { return {c.submitted, c.completed, c.failed, c.running, c.queued}; }
Counts counts_from(const Json& j) { return {j.at(0), j.at(1), j.at(2), j.at(3), j.at(4)}; }
Json latency_json(const LatencyStats& l) { return {l.count, exact(l.mean), exact(l.p50), exact(l.p95), exact(l.p99), exact(l.max)}; }
LatencyStats latency_from(const Json& j) {
  return {j.at(0), exact_from(j.at(1)), exact_from(j.at(2)), exact_from(j.at(3)), exact_from(j.at(4)), exact_from(j.at(5))};
}

// Of a summary, what a comparison reads (compared_metrics, the pages' SLO targets, the run's end).
Json compared_summary_json(const Summary& s) {
  Json slos = Json::array(), tenants = Json::array();
  for (const SloResult& r : s.slos) {
    slos.push_back({r.tenant, r.deployment, r.work_class, r.metric, exact(r.target), exact(r.actual), r.at_least, exact(r.within_s), r.met});
  }
  for (const TenantSummary& t : s.tenants) {
    tenants.push_back({t.name, counts_json(t.workflows), latency_json(t.latency_s), exact(t.mean_wait_s), exact(t.mean_slowdown),
                       exact(t.throughput_per_s), exact(t.gpu_s)});
  }
  return {s.scenario, s.policy, s.seed, exact(s.makespan_s), exact(s.end_s), latency_json(s.latency_s), counts_json(s.workflows),
          exact(s.gpu_utilization), s.weight_loads, exact(s.weight_load_s), exact(s.fairness), exact(s.vram_utilization),
          exact(s.energy_j), exact(s.cost_usd), slos, tenants};
}

Summary compared_summary_from(const Json& j) {
  Summary s;
  s.scenario = j.at(0);
  s.policy = j.at(1);
  s.seed = j.at(2);
  s.makespan_s = exact_from(j.at(3));
  s.end_s = exact_from(j.at(4));
  s.latency_s = latency_from(j.at(5));
  s.workflows = counts_from(j.at(6));
  s.gpu_utilization = exact_from(j.at(7));
  s.weight_loads = j.at(8);
  s.weight_load_s = exact_from(j.at(9));
  s.fairness = exact_from(j.at(10));
  s.vram_utilization = exact_from(j.at(11));
  s.energy_j = exact_from(j.at(12));
  s.cost_usd = exact_from(j.at(13));
  for (const Json& r : j.at(14)) {
    s.slos.push_back({.tenant = r.at(0), .deployment = r.at(1), .work_class = r.at(2), .metric = r.at(3), .target = exact_from(r.at(4)),
                      .actual = exact_from(r.at(5)), .at_least = r.at(6), .within_s = exact_from(r.at(7)), .met = r.at(8)});
  }
  for (const Json& t : j.at(15)) {
    s.tenants.push_back({.name = t.at(0), .workflows = counts_from(t.at(1)), .latency_s = latency_from(t.at(2)), .mean_wait_s = exact_from(t.at(3)),
                         .mean_slowdown = exact_from(t.at(4)), .throughput_per_s = exact_from(t.at(5)), .gpu_s = exact_from(t.at(6))});
  }
  return s;
}

}  // namespace

MetricStats mean_ci95(const std::vector<double>& values) {
  MetricStats s;
  if (values.empty()) return s;
  for (double v : values) s.mean += v;
  s.mean /= static_cast<double>(values.size());
  if (values.size() < 2) return s;
  double var = 0;
  for (double v : values) var += (v - s.mean) * (v - s.mean);
  var /= static_cast<double>(values.size() - 1);
  s.sd = std::sqrt(var);
  s.ci95 = t95(values.size() - 1) * std::sqrt(var / static_cast<double>(values.size()));
  return s;
}

unsigned seeds_to_settle(double sd, double gap, std::size_t have) {
  if (!(gap > 0) || !(sd > 0)) return 0;
  for (std::size_t n = std::max<std::size_t>(have + 1, 2); n <= 10000; ++n) {
    if (t95(n - 1) * sd / std::sqrt(static_cast<double>(n)) < gap) return static_cast<unsigned>(n);
  }
  return 0;
}

std::vector<ComparedMetric> compared_metrics(const Summary& example) {
  std::vector<ComparedMetric> metrics{
      {"makespan", "s", [](const Summary& s) { return s.makespan_s; }},
      {"latency mean", "s", [](const Summary& s) { return s.latency_s.mean; }},
      {"latency p50", "s", [](const Summary& s) { return s.latency_s.p50; }},
      {"latency p95", "s", [](const Summary& s) { return s.latency_s.p95; }},
      {"latency p99", "s", [](const Summary& s) { return s.latency_s.p99; }},
      {"GPU utilization", "%", [](const Summary& s) { return 100 * s.gpu_utilization; }},
      {"weight loads", "", [](const Summary& s) { return static_cast<double>(s.weight_loads); }},
      {"weight load time", "s", [](const Summary& s) { return s.weight_load_s; }},
      {"completed", "", [](const Summary& s) { return static_cast<double>(s.workflows.completed); }},
      {"SLOs met", "%", [](const Summary& s) {
         if (s.slos.empty()) return 100.0;
         double met = 0;
         for (const SloResult& r : s.slos) met += r.met ? 1 : 0;
         return 100 * met / static_cast<double>(s.slos.size());
       }},
      {"fairness (Jain)", "", [](const Summary& s) { return s.fairness; }},
      {"VRAM utilization", "%", [](const Summary& s) { return 100 * s.vram_utilization; }},
      {"energy", "kWh", [](const Summary& s) { return s.energy_j / 3.6e6; }},
      {"cost", "$", [](const Summary& s) { return s.cost_usd; }},
  };
  // Per tenant: who pays for a policy's choices is what a multi-tenant comparison is about.
  if (example.tenants.size() > 1) {
    for (std::size_t t = 0; t < example.tenants.size(); ++t) {
      const std::string& name = example.tenants[t].name;
      metrics.push_back({name + " latency p95", "s", [t](const Summary& s) { return s.tenants[t].latency_s.p95; }});
      metrics.push_back({name + " task wait", "s", [t](const Summary& s) { return s.tenants[t].mean_wait_s; }});
    }
  }
  return metrics;
}

std::vector<ComparedMetric> compared_metrics(const std::vector<PolicyRuns>& results) {
  const bool any = !results.empty() && !results.front().runs.empty();
  std::vector<ComparedMetric> metrics = compared_metrics(any ? results.front().runs.front() : Summary{});
  if (!any) return metrics;
  // Rows that mean nothing for these runs are left out: SLOs met where the scenario sets none (it would
  // read 100%), weight loads and VRAM where no run loaded weights or held VRAM (a trace of jobs without models).
  const bool slos = !results.front().runs.front().slos.empty();
  bool loads = false, vram = false;
  for (const PolicyRuns& r : results) {
    for (const Summary& s : r.runs) {
      loads = loads || s.weight_loads > 0;
      vram = vram || s.vram_utilization > 0;
    }
  }
  std::erase_if(metrics, [&](const ComparedMetric& m) {
    return (m.name == "SLOs met" && !slos) || ((m.name == "weight loads" || m.name == "weight load time") && !loads) ||
           (m.name == "VRAM utilization" && !vram);
  });
  return metrics;
}

std::size_t compare_baseline(const std::vector<PolicyRuns>& results) {
  for (std::size_t p = 0; p < results.size(); ++p) {
    if (results[p].policy == "fifo") return p;
  }
  return 0;
}

namespace {

// The type-7 percentile of `values` (reordered), as latency_stats computes it, in linear time.
double percentile_in_place(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double low = values[lo];
  if (lo + 1 >= values.size()) return low;
  const double high = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo) + 1, values.end());
  return low + (rank - static_cast<double>(lo)) * (high - low);
}

// "latency mean": none; "latency pNN": NN.
std::optional<double> percentile_of(const std::string& statistic) {
  if (statistic == "latency mean") return std::nullopt;
  const std::string prefix = "latency p";
  double p = -1;
  std::size_t used = 0;
  if (statistic.rfind(prefix, 0) == 0 && statistic.size() > prefix.size()) p = std::stod(statistic.substr(prefix.size()), &used);
  FLEETSIM_CHECK(used == statistic.size() - prefix.size() && p >= 0 && p <= 100, "a bootstrap of \"" + statistic + "\": expected latency mean or latency pNN");
  return p;
}

// The statistic over `values` (reordered); NaN over none.
double statistic_of(std::vector<double>& values, std::optional<double> percentile) {
  if (values.empty()) return std::nan("");
  if (percentile) return percentile_in_place(values, *percentile);
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// The instance latencies of a run, in instance order (NaN where not measured).
std::vector<double> latencies_of(const Scenario& scenario, const RunResult& run) {
  std::vector<double> out;
  out.reserve(run.trace.instances.size());
  for (const InstanceRecord& inst : run.trace.instances) out.push_back(measured_latency(scenario, inst).value_or(std::nan("")));
  return out;
}

const std::vector<std::string> kResampledMetrics{"latency mean", "latency p95", "latency p99"};

}  // namespace

InstanceInterval bootstrap_difference(const std::vector<double>& base, const std::vector<double>& other, const std::string& statistic,
                                      unsigned resamples) {
  InstanceInterval out{.metric = statistic};
  const std::optional<double> percentile_p = percentile_of(statistic);
  std::vector<std::uint32_t> measured;  // instances either run measured: the others add nothing to either side
  for (std::uint32_t i = 0; i < std::min(base.size(), other.size()); ++i) {
    if (!std::isnan(base[i]) || !std::isnan(other[i])) measured.push_back(i);
  }
  out.instances = measured.size();
  if (measured.empty() || resamples == 0) return out;
  Rng rng(0, 0, "compare/bootstrap");
  std::vector<double> differences, a, b;
  differences.reserve(resamples);
  a.reserve(measured.size());
  b.reserve(measured.size());
  for (unsigned k = 0; k < resamples; ++k) {
    a.clear();
    b.clear();
    for (std::size_t n = 0; n < measured.size(); ++n) {
      const std::uint32_t i = measured[static_cast<std::size_t>(rng.uniform() * static_cast<double>(measured.size()))];
      if (!std::isnan(base[i])) a.push_back(base[i]);
      if (!std::isnan(other[i])) b.push_back(other[i]);
    }
    const double difference = statistic_of(b, percentile_p) - statistic_of(a, percentile_p);
    if (!std::isnan(difference)) differences.push_back(difference);  // a side that drew none of its instances
  }
  if (differences.empty()) {
    out.instances = 0;
    return out;
  }
  out.low = percentile(differences, 2.5);
  out.high = percentile(differences, 97.5);
  return out;
}

std::vector<PolicyVerdict> compare_verdicts(const std::vector<PolicyRuns>& results) {
  std::vector<PolicyVerdict> verdicts;
  if (results.size() < 2) return verdicts;
  const std::size_t base = compare_baseline(results);
  // The metrics a verdict is about: where lower is better, and the cluster's, not a tenant's.
  static const std::vector<std::string> judged{"makespan", "latency mean", "latency p95", "latency p99", "cost"};
  std::vector<ComparedMetric> metrics;
  for (const ComparedMetric& m : compared_metrics(results)) {
    if (std::find(judged.begin(), judged.end(), m.name) != judged.end()) metrics.push_back(m);
  }
  const std::vector<Summary>& base_runs = results[base].runs;
  for (std::size_t p = 0; p < results.size(); ++p) {
    if (p == base) continue;
    PolicyVerdict v{results[p].policy, results[base].policy, results[p].runs.size(), results[p].seeds_repeat, {}};
    const std::size_t n = std::min(results[p].runs.size(), base_runs.size());
    for (const ComparedMetric& m : metrics) {
      MetricVerdict mv{.metric = m.name, .unit = m.unit};
      std::vector<double> differences;
      for (std::size_t k = 0; k < n; ++k) {
        const double b = m.read(base_runs[k]), x = m.read(results[p].runs[k]);
        mv.baseline += b / static_cast<double>(n);
        mv.value += x / static_cast<double>(n);
        differences.push_back(x - b);
      }
      const MetricStats d = mean_ci95(differences);
      mv.difference = d.mean;
      mv.ci95 = d.ci95;
      const bool identical = std::all_of(differences.begin(), differences.end(), [](double x) { return x == 0; });
      const auto interval = std::find_if(results[p].instance_intervals.begin(), results[p].instance_intervals.end(),
                                         [&](const InstanceInterval& i) { return i.metric == m.name; });
      if (n == 1 && interval != results[p].instance_intervals.end() && interval->instances > 0) mv.interval = *interval;
      if (identical) {
        mv.call = MetricVerdict::Call::same;
      } else if (mv.interval) {  // one run each: the instances say how sure
        mv.call = mv.interval->low > 0 ? MetricVerdict::Call::higher : mv.interval->high < 0 ? MetricVerdict::Call::lower : MetricVerdict::Call::not_sure;
      } else if (n == 1 || std::abs(d.mean) > d.ci95) {
        mv.call = d.mean < 0 ? MetricVerdict::Call::lower : MetricVerdict::Call::higher;
      } else {
        mv.call = MetricVerdict::Call::not_sure;
        mv.seeds_to_settle = seeds_to_settle(d.sd, std::abs(d.mean), n);
      }
      v.metrics.push_back(std::move(mv));
    }
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

std::vector<const PolicyInfo*> find_policies(const std::vector<std::string>& names) {
  std::vector<const PolicyInfo*> found;
  std::vector<Problem> problems;
  for (const std::string& name : names) {
    const PolicyInfo* info = find_policy(name);
    if (info == nullptr) {
      problems.push_back(Problem{"--policies", "", "unknown policy \"" + name + "\" (expected one of " + policy_names() + ")" + did_you_mean(name, policy_ids())});
    }
    found.push_back(info);
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  return found;
}

Scenario with_policy(Scenario scenario, const PolicyInfo& policy) {
  if (scenario.policy.name != policy.name) {
    scenario.policy.name = policy.name;
    scenario.policy.params = PolicyParams();
    for (const ParamInfo& p : policy.params) scenario.policy.params.set(p.name, p.default_value);
  }
  return scenario;
}

std::vector<PolicyRuns> compare_policies(const Scenario& scenario, const std::vector<std::string>& policies,
                                         unsigned seeds, unsigned threads,
                                         const std::function<void(std::size_t, std::size_t)>& progress, const CompareRanks& ranks) {
  std::vector<Scenario> variants;
  for (const PolicyInfo* info : find_policies(policies)) variants.push_back(with_policy(scenario, *info));
  if (seeds == 0) throw InputError({Problem{"--seeds", "", "expected at least 1 seed"}});
  // A scenario that draws nothing at random gives every seed the same run: one each is the answer.
  const bool seeds_repeat = seed_use(scenario).empty();
  if (seeds_repeat) seeds = 1;

  std::vector<PolicyRuns> results(variants.size());
  for (std::size_t p = 0; p < variants.size(); ++p) {
    results[p].policy = variants[p].policy.name;
    results[p].runs.resize(seeds);
    results[p].seeds_repeat = seeds_repeat;
  }
  for (PolicyRuns& r : results) r.latencies.resize(seeds);
  // This rank's runs: every `ranks`-th, policy by policy and seed by seed.
  const unsigned share = std::max(1u, ranks.ranks);
  std::vector<std::size_t> mine;
  for (std::size_t job = ranks.rank; job < variants.size() * seeds; job += share) mine.push_back(job);
  detail::parallel_for(
      mine.size(), threads,
      [&](std::size_t i) {
        const std::size_t p = mine[i] / seeds, k = mine[i] % seeds;
        RunResult run = simulate(variants[p], {.seed = variants[p].seed + k});
        results[p].runs[k] = std::move(run.summary);
        results[p].latencies[k] = latencies_of(variants[p], run);
        if (k == 0) results[p].waiting = waiting_tasks(run.trace, results[p].runs[0].end_s, kOverTimeBins).series(1);
      },
      progress);
  if (share > 1) {
    FLEETSIM_CHECK(static_cast<bool>(ranks.exchange), "a comparison over several ranks needs an exchange");
    Json local = Json::array();
    for (std::size_t job : mine) {
      const std::size_t p = job / seeds, k = job % seeds;
      Json waiting = Json::array();
      if (k == 0) {
        for (const auto& [t, tasks] : results[p].waiting) waiting.push_back({exact(t), exact(tasks)});
      }
      local.push_back({job, compared_summary_json(results[p].runs[k]), exact(results[p].latencies[k]), waiting});
    }
    std::vector<bool> received(variants.size() * seeds, false);
    for (const std::string& text : ranks.exchange(local.dump())) {
      for (const Json& run : Json::parse(text)) {
        const std::size_t job = run.at(0), p = job / seeds, k = job % seeds;
        FLEETSIM_CHECK(job < received.size() && !received[job], "each run comes back from the exchange once");
        received[job] = true;
        if (job % share == ranks.rank) continue;  // this rank's own, kept whole
        results.at(p).runs.at(k) = compared_summary_from(run.at(1));
        results[p].latencies[k] = exact_list(run.at(2));
        if (k == 0) {
          for (const Json& bin : run.at(3)) results[p].waiting.emplace_back(exact_from(bin.at(0)), exact_from(bin.at(1)));
        }
      }
    }
    FLEETSIM_CHECK(std::all_of(received.begin(), received.end(), [](bool r) { return r; }), "every rank's runs came back from the exchange");
  }
  if (seeds == 1 && results.size() > 1) {  // one run each: the instances say how sure
    const std::size_t base = compare_baseline(results);
    for (PolicyRuns& r : results) r.instance_intervals.resize(kResampledMetrics.size());
    detail::parallel_for(results.size() * kResampledMetrics.size(), threads, [&](std::size_t job) {
      const std::size_t p = job / kResampledMetrics.size(), m = job % kResampledMetrics.size();
      if (p != base) results[p].instance_intervals[m] = bootstrap_difference(results[base].latencies[0], results[p].latencies[0], kResampledMetrics[m]);
    });
    results[base].instance_intervals.clear();
  }
  return results;
}

}  // namespace fleetsim
