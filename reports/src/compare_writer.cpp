#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "csv.hpp"
#include "readable.hpp"
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

}  // namespace

void write_comparison_text(std::ostream& out, const std::string& scenario, unsigned seeds,
                           const std::vector<PolicyRuns>& results) {
  out << "scenario " << scenario << ": " << results.size() << " policies x " << seeds
      << " seeds; mean +- 95% confidence half-width\n\n";
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
  nlohmann::ordered_json doc{{"scenario", scenario}, {"policies", policies}};
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
