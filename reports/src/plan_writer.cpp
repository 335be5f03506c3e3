#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

std::string usd(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.0f", v);
  return buf;
}

// Seeds that agree to rounding show a 0 half-width, not a count of attoseconds.
std::string slo_ci(const std::string& metric, const MetricStats& m) {
  const double ci = m.ci95 < 1e-9 * std::abs(m.mean) ? 0.0 : m.ci95;
  return format_slo_value(metric, m.mean) + " +- " + format_slo_value(metric, ci);
}

std::string time_ci(const MetricStats& m) { return slo_ci("latency", m); }

std::string configuration(const PlanPoint& p) {
  if (p.gpus == 0) return p.node_type + ", " + p.policy;  // could not run at all
  return std::to_string(p.nodes) + " x " + p.node_type + " (" + std::to_string(p.gpus) + " GPUs), " + p.fabric + ", " + p.policy;
}

std::string load_name(double load) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gx", load);
  return buf;
}

}  // namespace

void write_plan_text(std::ostream& out, const PlanSpec& spec, const PlanResult& r) {
  out << "plan " << spec.file << " over " << spec.base << ": " << r.points.size() << " points simulated ("
      << spec.seeds << " seeds each, " << spec.confirm_seeds << " fresh seeds to confirm)\n\n";
  for (const PlanRecommendation& rec : r.loads) {
    out << "load " << load_name(rec.load) << ": ";
    if (!rec.point) {
      out << "no configuration in the search space meets the SLOs\n";
      continue;
    }
    const PlanPoint& p = r.points[*rec.point];
    const PlanPoint& c = r.points[*rec.confirmed];
    out << configuration(p) << ", " << usd(p.monthly_usd) << " a month\n";
    for (std::size_t i = 0; i < p.slos.size(); ++i) {
      const SloStats& s = p.slos[i];
      out << "  " << s.name << " " << slo_ci(s.metric, s.actual) << " (target " << (s.at_least ? ">= " : "<= ") << format_slo_value(s.metric, s.target)
          << "); confirmed " << slo_ci(s.metric, c.slos[i].actual) << " over " << c.seeds << " fresh seeds\n";
    }
  }
  out << "\n load  configuration                                            $/month   p95 latency              util   verdict\n";
  char line[512];
  for (const PlanPoint& p : r.points) {
    std::snprintf(line, sizeof line, "%5s  %-55s %9s   %-22s %5.1f%%   %s%s\n", load_name(p.load).c_str(), configuration(p).c_str(),
                  usd(p.monthly_usd).c_str(), time_ci(p.p95_s).c_str(), 100 * p.utilization.mean, p.confirmation ? "confirmation: " : "",
                  p.verdict.c_str());
    out << line;
  }
  for (const PlanRecommendation& rec : r.loads) {
    out << "\nPareto frontier at load " << load_name(rec.load) << " (monthly cost against p95 latency):\n";
    for (std::size_t i : rec.frontier) {
      const PlanPoint& p = r.points[i];
      out << "  " << usd(p.monthly_usd) << "  p95 " << format_quantity(p.p95_s.mean, Dimension::time) << "  " << configuration(p)
          << (p.passes ? "" : "  (fails: " + p.verdict + ")") << "\n";
    }
  }
}

std::string plan_json(const PlanSpec& spec, const PlanResult& r) {
  using nlohmann::ordered_json;
  auto stats = [](const MetricStats& m) { return ordered_json{{"mean", m.mean}, {"ci95", m.ci95}}; };
  ordered_json points = ordered_json::array();
  for (const PlanPoint& p : r.points) {
    ordered_json slos = ordered_json::array();
    for (const SloStats& s : p.slos) {
      slos.push_back({{"name", s.name}, {"metric", s.metric}, {"target", s.target}, {"at_least", s.at_least}, {"actual", stats(s.actual)}});
    }
    points.push_back({{"load", p.load},       {"node_type", p.node_type},  {"nodes", p.nodes},     {"gpus", p.gpus},
                      {"fabric", p.fabric},   {"policy", p.policy},        {"monthly_usd", p.monthly_usd},
                      {"confirmation", p.confirmation}, {"seeds", p.seeds}, {"latency_p95_s", stats(p.p95_s)},
                      {"latency_p99_s", stats(p.p99_s)}, {"latency_mean_s", stats(p.mean_s)},
                      {"gpu_utilization", stats(p.utilization)}, {"slos", slos}, {"passes", p.passes}, {"verdict", p.verdict}});
  }
  ordered_json loads = ordered_json::array();
  for (const PlanRecommendation& rec : r.loads) {
    ordered_json entry{{"load", rec.load}};
    entry["recommended"] = rec.point ? ordered_json(*rec.point) : ordered_json(nullptr);
    entry["confirmation"] = rec.confirmed ? ordered_json(*rec.confirmed) : ordered_json(nullptr);
    entry["frontier"] = rec.frontier;
    loads.push_back(entry);
  }
  ordered_json doc{{"plan", spec.file}, {"base", spec.base}, {"loads", loads}, {"points", points}};
  return doc.dump(1) + "\n";
}

void write_plan_csv(std::ostream& out, const PlanResult& r) {
  out << "load,node_type,nodes,gpus,fabric,policy,monthly_usd,confirmation,seeds,p95_s,p95_ci95_s,p99_s,mean_s,gpu_utilization,passes,verdict\n";
  for (const PlanPoint& p : r.points) {
    std::string verdict = p.verdict;
    std::replace(verdict.begin(), verdict.end(), '"', '\'');
    out << p.load << ',' << p.node_type << ',' << p.nodes << ',' << p.gpus << ',' << p.fabric << ',' << p.policy << ',' << p.monthly_usd << ','
        << (p.confirmation ? 1 : 0) << ',' << p.seeds << ',' << p.p95_s.mean << ',' << p.p95_s.ci95 << ',' << p.p99_s.mean << ','
        << p.mean_s.mean << ',' << p.utilization.mean << ',' << (p.passes ? 1 : 0) << ",\"" << verdict << "\"\n";
  }
}

void write_plan_html(std::ostream& out, const PlanSpec& spec, const PlanResult& r) {
  constexpr double kW = 640, kH = 400, kPad = 70;
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  double max_cost = 1, max_p95 = 1e-3;
  for (const PlanPoint& p : r.points) {
    if (p.confirmation || p.verdict.find("queue grew") != std::string::npos) continue;
    max_cost = std::max(max_cost, p.monthly_usd);
    max_p95 = std::max(max_p95, p.p95_s.mean);
  }
  auto x = [&](double cost) { return cost / (max_cost * 1.05) * kW; };
  auto y = [&](double p95) { return kH - p95 / (max_p95 * 1.1) * kH; };
  char buf[512];
  out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fleetsim plan: " << spec.file << "</title>\n"
      << "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}</style>\n"
      << "</head><body>\n<h1>Capacity plan</h1>\n<p>" << spec.file << " over " << spec.base << "</p>\n";
  std::snprintf(buf, sizeof buf, "<svg id=\"frontier\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-size=\"12\">\n<g transform=\"translate(%g,20)\">\n",
                kW + 2 * kPad, kH + 80, kPad);
  out << buf;
  std::snprintf(buf, sizeof buf, "<rect width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n", kW, kH);
  out << buf;
  for (int t = 0; t <= 4; ++t) {
    const double cost = max_cost * 1.05 * t / 4, p95 = max_p95 * 1.1 * t / 4;
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text><text x=\"-6\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x(cost),
                  kH + 16, usd(cost).c_str(), y(p95) + 4, format_quantity(p95, Dimension::time).c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">monthly cost</text>\n<text transform=\"translate(-56,%g) rotate(-90)\" text-anchor=\"middle\">p95 latency</text>\n",
                kW / 2, kH + 36, kH / 2);
  out << buf;
  for (std::size_t l = 0; l < r.loads.size(); ++l) {
    const PlanRecommendation& rec = r.loads[l];
    const char* color = kColors[l % 6];
    std::string path;
    for (std::size_t i : rec.frontier) {
      std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", path.empty() ? "" : " ", x(r.points[i].monthly_usd), y(r.points[i].p95_s.mean));
      path += buf;
    }
    std::snprintf(buf, sizeof buf, "<polyline class=\"frontier\" points=\"%s\" fill=\"none\" stroke=\"%s\"/>\n", path.c_str(), color);
    out << buf;
    for (const PlanPoint& p : r.points) {
      if (p.load != rec.load || p.confirmation || p.verdict.find("queue grew") != std::string::npos) continue;
      std::snprintf(buf, sizeof buf, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"%s\"><title>%s: %s</title></circle>\n",
                    x(p.monthly_usd), y(p.p95_s.mean), p.passes ? color : "white", color, configuration(p).c_str(), p.verdict.c_str());
      out << buf;
    }
    if (rec.point) {
      const PlanPoint& p = r.points[*rec.point];
      std::snprintf(buf, sizeof buf, "<circle class=\"recommended\" cx=\"%.1f\" cy=\"%.1f\" r=\"9\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                    x(p.monthly_usd), y(p.p95_s.mean), color);
      out << buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%zu\" fill=\"%s\">load %s</text>\n", kW - 80, 16 + 16 * l, color, load_name(rec.load).c_str());
    out << buf;
  }
  out << "</g></svg>\n<p>Filled: meets every SLO; hollow: does not; ringed: recommended; lines: Pareto frontiers.</p>\n";
  out << "<table><tr><th>load</th><th>configuration</th><th>$/month</th><th>p95 latency</th><th>verdict</th></tr>\n";
  for (const PlanPoint& p : r.points) {
    out << "<tr><td>" << load_name(p.load) << "</td><td>" << configuration(p) << "</td><td>" << usd(p.monthly_usd) << "</td><td>" << time_ci(p.p95_s)
        << "</td><td>" << (p.confirmation ? "confirmation: " : "") << p.verdict << "</td></tr>\n";
  }
  out << "</table>\n</body></html>\n";
}

}  // namespace fleetsim
