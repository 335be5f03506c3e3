#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <nlohmann/json.hpp>

#include "csv.hpp"
#include "readable.hpp"
#include "svg_chart.hpp"
#include "fleetsim/report.hpp"

namespace fleetsim {
namespace {

std::vector<double> values_of(const PolicyRuns& runs, const ComparedMetric& m) {
  std::vector<double> v;
  for (const Summary& s : runs.runs) v.push_back(m.read(s));
  return v;
}

// Times in the unit that suits the row's largest mean, so that no cell needs an exponent.
struct RowUnit {
  std::string unit;
  double scale = 1;
};

RowUnit row_unit(const ComparedMetric& m, const std::vector<PolicyRuns>& results) {
  if (m.unit != "s") return {m.unit, 1};
  double largest = 0;
  for (const PolicyRuns& r : results) largest = std::max(largest, std::abs(mean_ci95(values_of(r, m)).mean));
  const TimeUnit unit = time_unit_for(largest);
  return {unit.name, unit.seconds};
}

std::string label_of(const ComparedMetric& m, const std::string& unit) { return unit.empty() ? m.name : m.name + " (" + unit + ")"; }

// The scenario's latency target for a compared metric ("latency p95" against an SLO on latency_p95 of
// every tenant, "design latency p95" against the design tenant's), if it has one.
std::optional<double> latency_target(const ComparedMetric& m, const std::vector<PolicyRuns>& results) {
  if (results.empty() || results.front().runs.empty()) return std::nullopt;
  for (const SloResult& slo : results.front().runs.front().slos) {
    if (!slo.work_class.empty() || slo.at_least || slo.metric.rfind("latency_", 0) != 0) continue;
    std::string name = slo.metric;
    std::replace(name.begin(), name.end(), '_', ' ');
    if (m.name == (slo.tenant.empty() ? name : slo.tenant + " " + name)) return slo.target;
  }
  return std::nullopt;
}

// A metric's value as read in a sentence: times in the unit that suits the pair, money in dollars (cents
// and below with three significant digits, so that a small difference still shows).
std::string amount(const MetricVerdict& m, double x) {
  if (m.unit == "s") {
    const TimeUnit unit = time_unit_for(std::max(std::abs(m.baseline), std::abs(m.value)));
    return readable(x / unit.seconds, 4) + " " + unit.name;
  }
  if (m.unit == "$") return (x < 0 ? "-" : "") + (std::abs(x) < 1 ? "$" + readable(std::abs(x), 3) : dollars(std::abs(x)));
  return m.unit.empty() ? readable(x, 4) : readable(x, 4) + " " + m.unit;
}

// "2.1x" for a factor of 1.5 or more, "4.2%" below it: how much lower or higher than the baseline.
std::string change(const MetricVerdict& m) {
  if (m.baseline == 0 || m.value == 0) return "";
  const double r = m.value / m.baseline;
  const double factor = r >= 1 ? r : 1 / r;
  return factor >= 1.5 ? readable(factor, 3) + "x " : readable(100 * std::abs(r - 1), 2) + "% ";
}

const char* call_name(MetricVerdict::Call call) {
  static constexpr const char* names[] = {"same", "lower", "higher", "not sure"};
  return names[static_cast<int>(call)];
}

// A verdict as lines, one per metric that differs: the call, the change, both means and, over several seeds,
// the 95% half-width of the paired difference.
std::vector<std::string> verdict_lines(const PolicyVerdict& v) {
  std::vector<std::string> lines;
  for (const MetricVerdict& m : v.metrics) {
    if (m.call == MetricVerdict::Call::same) continue;
    std::string call = call_name(m.call);
    call.resize(10, ' ');  // "not sure" and two spaces: the metrics line up
    std::string text = call + m.metric + " " + change(m) + "(" + amount(m, m.baseline) +
                       " to " + amount(m, m.value);
    if (v.runs > 1) text += ", difference " + amount(m, m.difference) + " +- " + amount(m, m.ci95);
    if (m.interval) {
      text += ", difference " + amount(m, m.difference) + ", 95% interval " + amount(m, m.interval->low) + " to " + amount(m, m.interval->high) +
              " over " + std::to_string(m.interval->instances) + " instances";
    }
    if (m.call == MetricVerdict::Call::not_sure) {
      text += m.interval                ? (v.seeds_repeat ? "; the instances do not settle it, and another seed would repeat the run"
                                                          : "; the instances of one run do not settle it; more seeds (--seeds) may")
              : m.seeds_to_settle > 0 ? "; about " + std::to_string(m.seeds_to_settle) + " seeds would settle it"
                                      : "; no number of seeds would tell them apart";
    }
    lines.push_back(text + ")");
  }
  if (lines.empty()) lines.push_back("the same as " + v.baseline + " on every one");
  return lines;
}

bool resampled(const std::vector<PolicyVerdict>& verdicts) {
  for (const PolicyVerdict& v : verdicts) {
    if (std::any_of(v.metrics.begin(), v.metrics.end(), [](const MetricVerdict& m) { return m.interval.has_value(); })) return true;
  }
  return false;
}

std::string verdict_heading(const std::vector<PolicyVerdict>& verdicts) {
  const PolicyVerdict& v = verdicts.front();
  return "verdict: each policy against " + v.baseline + " on makespan, latency and cost (lower is better), " +
         (v.runs > 1 ? "paired by seed over " + std::to_string(v.runs) + " seeds, 95% intervals"
                     : resampled(verdicts) ? "one run each: latency intervals by resampling the workflow instances (paired bootstrap, 95%), "
                                             "makespan and cost without one"
                                           : "one run each, so no interval");
}

// Each policy's workflow latencies (every run's measured instances, pooled over the seeds) as a
// cumulative distribution, one line a policy: where a mean or a p95 hides which jobs gained and which
// paid, the whole curve shows it.
void latency_distributions(std::ostream& out, const std::vector<PolicyRuns>& results) {
  std::vector<std::vector<double>> pooled(results.size());
  double lo = 1e300, hi = 0;
  for (std::size_t p = 0; p < results.size(); ++p) {
    for (const std::vector<double>& run : results[p].latencies) {
      for (double l : run) {
        if (std::isnan(l)) continue;
        pooled[p].push_back(std::max(l, 1e-9));
        lo = std::min(lo, pooled[p].back());
        hi = std::max(hi, pooled[p].back());
      }
    }
  }
  if (hi == 0) return;
  out << "<h2>Workflow latency distribution</h2>\n";
  html::SvgChart chart("compare-latency-cdf", "Workflow latency, cumulative distribution per policy (every run's completed instances)",
                       html::time_axis(lo, hi, "workflow latency (arrival to last task)"), {.lo = 0, .hi = 1, .label = "fraction of completed workflows"});
  std::vector<std::pair<std::string, const char*>> legend;
  for (std::size_t p = 0; p < results.size(); ++p) {
    if (pooled[p].empty()) continue;
    std::sort(pooled[p].begin(), pooled[p].end());
    chart.polyline(html::cdf_points(pooled[p]), html::color(p), results[p].policy);
    legend.emplace_back(results[p].policy, html::color(p));
  }
  chart.legend(legend);
  chart.write(out);
}

// Each policy's queue over its (first) run: ready tasks waiting for GPUs, time-averaged as on the run page. A
// policy that keeps the queue short shows it here, and one that lets it grow without bound too, where a mean
// latency hides whether the queue drained.
void queue_over_time(std::ostream& out, const std::vector<PolicyRuns>& results) {
  double end = 0, most = 1;
  for (const PolicyRuns& r : results) {
    if (r.waiting.empty() || r.runs.empty()) continue;
    end = std::max(end, r.runs.front().end_s);
    for (const auto& point : r.waiting) most = std::max(most, point.second);
  }
  if (end == 0) return;
  out << "<h2>Queue over time</h2>\n";
  html::SvgChart chart("compare-queue", "Ready tasks waiting for GPUs over time, per policy (time-averaged per bin; each policy's first run)",
                       html::seconds_axis(end, "time"), {.lo = 0, .hi = 4 * std::ceil(most * 1.1 / 4), .label = "tasks waiting"});
  std::vector<std::pair<std::string, const char*>> legend;
  for (std::size_t p = 0; p < results.size(); ++p) {
    if (results[p].waiting.empty()) continue;
    chart.polyline(results[p].waiting, html::color(p), results[p].policy);
    legend.emplace_back(results[p].policy, html::color(p));
  }
  chart.legend(legend);
  chart.write(out);
}

}  // namespace

void write_comparison_text(std::ostream& out, const std::string& scenario, unsigned seeds,
                           const std::vector<PolicyRuns>& results) {
  if (seeds == 1) {
    out << "scenario " << scenario << ": " << results.size() << " policies x 1 run\n\n";
  } else {
    out << "scenario " << scenario << ": " << results.size() << " policies x " << seeds << " seeds; mean +- 95% confidence half-width\n\n";
  }
  const std::vector<ComparedMetric> metrics = compared_metrics(results);
  std::vector<RowUnit> units;
  int width = 18;
  for (const ComparedMetric& m : metrics) {
    units.push_back(row_unit(m, results));
    width = std::max(width, static_cast<int>(label_of(m, units.back().unit).size()));
  }
  char cell[64];
  out << std::left << std::setw(width) << "metric" << std::right;
  for (const PolicyRuns& r : results) {
    std::snprintf(cell, sizeof cell, " %20s", r.policy.c_str());
    out << cell;
  }
  out << "\n";
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const ComparedMetric& m = metrics[i];
    out << std::left << std::setw(width) << label_of(m, units[i].unit) << std::right;
    for (const PolicyRuns& r : results) {
      const MetricStats s = mean_ci95(values_of(r, m));
      std::string number = readable(s.mean / units[i].scale, 4);
      if (seeds > 1) number += " +- " + readable(s.ci95 / units[i].scale, 2);
      std::snprintf(cell, sizeof cell, " %20s", number.c_str());
      out << cell;
    }
    out << "\n";
  }
  const std::vector<PolicyVerdict> verdicts = compare_verdicts(results);
  if (verdicts.empty()) return;
  out << "\n" << verdict_heading(verdicts) << "\n";
  std::size_t name_width = 0;
  for (const PolicyVerdict& v : verdicts) name_width = std::max(name_width, v.policy.size());
  for (const PolicyVerdict& v : verdicts) {
    const std::vector<std::string> lines = verdict_lines(v);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out << "  " << std::left << std::setw(static_cast<int>(name_width)) << (i == 0 ? v.policy : "") << std::right << "  " << lines[i] << "\n";
    }
  }
}

void write_comparison_html(std::ostream& out, const std::string& scenario, const std::vector<PolicyRuns>& results) {
  html::page_begin(out, "fleetsim compare: " + scenario);
  const std::size_t seeds = results.empty() ? 0 : results.front().runs.size();
  const std::vector<ComparedMetric> metrics = compared_metrics(results);
  if (seeds == 1) {
    out << "<p>" << results.size() << " policies, one run each (one seed: no confidence intervals over seeds; the verdict's latency intervals "
        << "resample the workflow instances).</p>\n";
  } else {
    out << "<p>" << results.size() << " policies, " << seeds
        << " seeds each: means with their 95% confidence half-widths (Student's t), in the table and as bars with whiskers.</p>\n";
  }
  // The answer first: each policy against the baseline, then the numbers.
  if (const std::vector<PolicyVerdict> verdicts = compare_verdicts(results); !verdicts.empty()) {
    out << "<h2>Verdict</h2>\n<p>" << html::escape(verdict_heading(verdicts)) << ".</p>\n<ul id=\"verdict\">\n";
    for (const PolicyVerdict& v : verdicts) {
      out << "<li><b>" << html::escape(v.policy) << "</b>";
      for (const std::string& line : verdict_lines(v)) out << "<br>" << html::escape(line);
      out << "</li>\n";
    }
    out << "</ul>\n";
  }
  // The numbers: one row per metric, one column per policy, times in the unit that suits the row.
  out << "<div class=\"wide\"><table id=\"comparison\"><tr><th>metric</th>";
  for (const PolicyRuns& r : results) out << "<th>" << html::escape(r.policy) << "</th>";
  out << "</tr>\n";
  for (const ComparedMetric& m : metrics) {
    const RowUnit unit = row_unit(m, results);
    out << "<tr><td>" << html::escape(label_of(m, unit.unit)) << "</td>";
    for (const PolicyRuns& r : results) {
      const MetricStats s = mean_ci95(values_of(r, m));
      out << "<td class=\"n\">" << readable(s.mean / unit.scale, 4);
      if (seeds > 1) out << " &plusmn; " << readable(s.ci95 / unit.scale, 2);
      out << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table></div>\n";
  latency_distributions(out, results);
  queue_over_time(out, results);

  html::Axis x{.lo = 0, .hi = static_cast<double>(results.size()), .label = "policy"};
  for (std::size_t p = 0; p < results.size(); ++p) x.ticks.emplace_back(static_cast<double>(p) + 0.5, results[p].policy);
  for (const ComparedMetric& m : metrics) {
    std::vector<MetricStats> stats;
    double top = 0;
    for (const PolicyRuns& r : results) {
      stats.push_back(mean_ci95(values_of(r, m)));
      top = std::max(top, stats.back().mean + stats.back().ci95);
    }
    const std::optional<double> target = latency_target(m, results);
    if (target) top = std::max(top, *target);
    if (top <= 0) top = 1;
    std::string id = "compare-" + m.name;
    std::replace_if(id.begin(), id.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '-');
    // Times in the unit that suits the largest bar; shares of a whole end at 100 %.
    const TimeUnit unit = m.unit == "s" ? time_unit_for(top) : TimeUnit{m.unit.c_str(), 1};
    const std::string label = m.unit.empty() ? m.name : m.name + " (" + unit.name + ")";
    const double hi = m.unit == "%" ? 100 : html::nice_ceiling(top * 1.05 / unit.seconds);
    html::SvgChart chart(id, label, x, {.lo = 0, .hi = hi, .label = label}, 720, 180);
    for (std::size_t p = 0; p < results.size(); ++p) {
      const double mean = stats[p].mean / unit.seconds, ci95 = stats[p].ci95 / unit.seconds;
      const std::string tip = results[p].policy + ": " + readable(mean, 4) + " +- " + readable(ci95, 2);
      chart.rect(static_cast<double>(p) + 0.2, static_cast<double>(p) + 0.8, 0, mean, html::color(p), tip);
      if (ci95 > 0) chart.error_bar(static_cast<double>(p) + 0.5, mean - ci95, std::min(mean + ci95, hi), "#222");
    }
    if (target) {
      chart.guide(0, *target / unit.seconds, static_cast<double>(results.size()), *target / unit.seconds, "#d62728", true);
      chart.legend({{"target " + readable(*target / unit.seconds, 4) + " " + unit.name, "#d62728"}});
    }
    chart.write(out);
  }
  html::page_end(out);
}

void write_comparison_csv(std::ostream& out, const std::vector<PolicyRuns>& results) {
  const std::vector<ComparedMetric> metrics = compared_metrics(results);
  out << "policy,seed";
  for (const ComparedMetric& m : metrics) out << ',' << csv_quote(m.name);
  out << '\n';
  for (const PolicyRuns& r : results) {
    for (const Summary& s : r.runs) {
      out << r.policy << ',' << s.seed;
      for (const ComparedMetric& m : metrics) {
        char number[32];
        std::snprintf(number, sizeof number, "%.17g", m.read(s));
        out << ',' << number;
      }
      out << '\n';
    }
  }
}

std::string comparison_json(const std::string& scenario, const std::vector<PolicyRuns>& results) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::array();
  for (const PolicyRuns& r : results) {
    nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
    for (const ComparedMetric& m : compared_metrics(results)) {
      const auto values = values_of(r, m);
      const MetricStats s = mean_ci95(values);
      metrics[m.name] = {{"unit", m.unit}, {"mean", s.mean}, {"ci95", s.ci95}, {"values", values}};
    }
    policies.push_back({{"policy", r.policy}, {"metrics", metrics}});
  }
  nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
  for (const PolicyVerdict& v : compare_verdicts(results)) {
    nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
    for (const MetricVerdict& m : v.metrics) {
      metrics.push_back({{"metric", m.metric}, {"unit", m.unit}, {"baseline", m.baseline}, {"value", m.value}, {"difference", m.difference},
                         {"ci95", m.ci95}, {"call", call_name(m.call)}, {"seeds_to_settle", m.seeds_to_settle}});
      if (m.interval) {
        metrics.back()["instance_interval"] = {{"low", m.interval->low}, {"high", m.interval->high}, {"instances", m.interval->instances}};
      }
    }
    verdicts.push_back({{"policy", v.policy}, {"baseline", v.baseline}, {"runs", v.runs}, {"metrics", metrics}});
  }
  nlohmann::ordered_json doc{{"scenario", scenario}, {"policies", policies}, {"verdicts", verdicts}};
  return doc.dump(2) + "\n";
}

void write_policies_text(std::ostream& out) {
  for (const PolicyInfo& p : policy_registry()) {
    out << p.name << "\n    " << p.summary << "\n    reference: " << p.reference << "\n";
    for (const ParamInfo& param : p.params) {
      out << "    param " << param.name << " (" << param_type_name(param.type) << "): " << param.help << "\n";
    }
  }
}

std::string policies_json() {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PolicyInfo& p : policy_registry()) {
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (const ParamInfo& param : p.params) {
      nlohmann::ordered_json def;
      std::visit([&](const auto& v) { def = v; }, param.default_value);
      params.push_back({{"name", param.name}, {"type", param_type_name(param.type)}, {"default", def}, {"help", param.help}});
    }
    list.push_back({{"name", p.name}, {"summary", p.summary}, {"reference", p.reference}, {"params", params}});
  }
  return list.dump(2) + "\n";
}

}  // namespace fleetsim
