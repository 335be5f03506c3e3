#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cost_text.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"
#include "svg_chart.hpp"

namespace fleetsim {
namespace {

std::string usd(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.0f", v);
  return buf;
}

// Dollars with thousands separators, for the page ($15,710).
std::string usd_grouped(double v) {
  std::string digits = usd(v).substr(1);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && std::isdigit(static_cast<unsigned char>(digits[i - 1])); i -= 3) digits.insert(i, ",");
  return "$" + digits;
}

// "12 s +- 1.37 s" as a page shows it: 12 s ± 1.37 s.
std::string plus_minus(std::string text) {
  for (std::size_t at = text.find("+-"); at != std::string::npos; at = text.find("+-", at)) text.replace(at, 2, "\u00b1");
  return text;
}

// A point that never ran (no cluster could hold the work): no cost or latency to plot.
bool ran(const PlanPoint& p) { return p.ran(); }

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

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

// One node type's best, as a line: the configuration, its cost, p95 and use, or why none meets the SLOs.
std::string option_text(const PlanResult& r, const PlanRecommendation& rec, const PlanOption& o) {
  char line[512];
  if (o.point) {
    const PlanPoint& p = r.points[*o.point];
    const bool recommended = rec.point && *rec.point == *o.point;
    const std::string what = std::to_string(p.nodes) + " nodes (" + std::to_string(p.gpus) + " GPUs), " + p.fabric + ", " + p.policy;
    std::snprintf(line, sizeof line, "%-16s %-48s %9s   p95 %-20s use %6s   %s", o.node_type.c_str(), what.c_str(), usd(p.monthly_usd).c_str(),
                  time_ci(p.p95_s).c_str(), percent(p.utilization.mean).c_str(), recommended ? "the recommendation" : "(its seeds only, not confirmed)");
  } else if (o.closest) {
    const PlanPoint& p = r.points[*o.closest];
    std::snprintf(line, sizeof line, "%-16s none meets every SLO; closest %d nodes (%s, p95 %s): %s", o.node_type.c_str(), p.nodes, usd(p.monthly_usd).c_str(),
                  time_ci(p.p95_s).c_str(), p.verdict.c_str());
  } else {
    std::snprintf(line, sizeof line, "%-16s cannot run the workload", o.node_type.c_str());
  }
  const bool ran = o.point || o.closest;
  return line + std::string(ran && kernel_guess(r.kernel_guesses, o.node_type) != nullptr ? " (kernel constants a guess: below)" : "");
}

std::string load_name(double load) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gx", load);
  return buf;
}

}  // namespace

std::string cost_basis_text(const OwnershipCost& cost) {
  if (!cost.given) return "";
  const auto off = [](double discount) { return format_number(discount * 100) + "% off"; };
  std::string ranked = "by renting on demand (every GPU at its catalog hourly price, 730 h)";
  if (cost.basis == OwnershipCost::Basis::reserved) ranked = "by renting reserved (on demand " + off(cost.reserved_discount) + ", as quoted)";
  if (cost.basis == OwnershipCost::Basis::spot) ranked = "by renting spot (on demand " + off(cost.spot_discount) + ", as quoted)";
  if (cost.basis == OwnershipCost::Basis::own) ranked = "by owning";
  char owning[240];
  std::snprintf(owning, sizeof owning,
                "; owning: the purchase over %.3g years, energy at the run's GPU utilization with PUE %.3g at $%.4g/kWh, colocation at $%.5g per kW-month "
                "provisioned",
                cost.years, cost.pue, cost.usd_per_kwh, cost.colocation_usd_per_kw_month);
  std::string text = "costs ranked " + ranked + owning;
  // Spot capacity can be taken back; the SLO figures hold only the preemptions the scenario itself models.
  if (cost.spot_discount > 0) text += "; spot: its SLO figures include preemptions only where the scenario models them (\"spot\" in the scenario)";
  return text;
}

std::string cost_text(const OwnershipCost& basis, const MonthlyCost& c) {
  if (!basis.given) return "";
  std::string text = c.own_usd > 0 ? "owning " + usd(c.own_usd) + " a month (purchase " + usd(c.capital_usd) + ", energy " + usd(c.energy_usd) + ", colocation " +
                                          usd(c.space_usd) + ")"
                                    : std::string("owning: no purchase price");
  text += "; renting " + usd(c.rent_usd) + " a month";
  if (c.reserved_usd > 0) text += ", reserved " + usd(c.reserved_usd);
  if (c.spot_usd > 0) text += ", spot " + usd(c.spot_usd);
  if (c.purchase_estimated) text += "; purchase estimated from card prices (x1.64, a rule of thumb)";
  if (c.power_estimated) text += "; system power a guess (1.5x the GPUs' TDP)";
  return text;
}

nlohmann::ordered_json monthly_cost_json(const MonthlyCost& c) {
  nlohmann::ordered_json j{{"rent_usd", c.rent_usd},          {"own_usd", c.own_usd},
                           {"capital_usd", c.capital_usd},    {"energy_usd", c.energy_usd},
                           {"colocation_usd", c.space_usd},   {"purchase_estimated", c.purchase_estimated},
                           {"power_estimated", c.power_estimated}};
  if (c.reserved_usd > 0) j["reserved_usd"] = c.reserved_usd;
  if (c.spot_usd > 0) j["spot_usd"] = c.spot_usd;
  return j;
}

void write_plan_text(std::ostream& out, const PlanSpec& spec, const PlanResult& r) {
  out << "plan " << spec.file << " over " << spec.base << ": " << r.points.size() << " points simulated ("
      << spec.seeds << " seeds each" << (spec.settle_seeds > 0 ? " (up to " + std::to_string(spec.settle_seeds) + " where not sure)" : std::string()) << ", "
      << spec.confirm_seeds << " fresh seeds to confirm)\n";
  if (spec.cost.given) out << cost_basis_text(spec.cost) << "\n";
  out << "\n";
  for (const PlanRecommendation& rec : r.loads) {
    if (rec.per_node_type.size() > 1) {
      out << "load " << load_name(rec.load) << ", the cheapest that meets every SLO per node type:\n";
      for (const PlanOption& o : rec.per_node_type) out << "  " << option_text(r, rec, o) << "\n";
    }
    out << "load " << load_name(rec.load) << (rec.per_node_type.size() > 1 ? ", overall: " : ": ");
    if (!rec.point) {
      out << "no configuration in the search space meets the SLOs\n";
      continue;
    }
    const PlanPoint& p = r.points[*rec.point];
    const PlanPoint& c = r.points[*rec.confirmed];
    out << configuration(p) << ", " << usd(p.monthly_usd) << " a month"
        << (kernel_guess(r.kernel_guesses, p.node_type) != nullptr ? " (its GPU's kernel constants a guess: below)" : "") << "\n";
    if (spec.cost.given) out << "  " << cost_text(spec.cost, p.cost) << "\n";
    for (std::size_t i = 0; i < p.slos.size(); ++i) {
      const SloStats& s = p.slos[i];
      out << "  " << s.name << " " << slo_ci(s.metric, s.actual) << " (target " << (s.at_least ? ">= " : "<= ") << format_slo_value(s.metric, s.target)
          << "); confirmed " << slo_ci(s.metric, c.slos[i].actual) << " over " << c.seeds << " fresh seeds\n";
    }
  }
  if (!r.kernel_guesses.empty()) {
    out << "\nnode types whose GPU's kernel constants are a guess (and so are the times above on them):\n";
    for (const auto& [type, why] : r.kernel_guesses) out << "  " << type << ": " << why << "\n";
  }
  out << "\n load  configuration                                            $/month   p95 latency              util   verdict\n";
  char line[512];
  for (const PlanPoint& p : r.points) {
    std::snprintf(line, sizeof line, "%5s  %-55s %9s   %-22s %6s   %s%s\n", load_name(p.load).c_str(), configuration(p).c_str(),
                  usd(p.monthly_usd).c_str(), p.ran() ? time_ci(p.p95_s).c_str() : "-", p.ran() ? percent(p.utilization.mean).c_str() : "-",
                  p.confirmation ? "confirmation: " : "", p.verdict.c_str());
    out << line;
  }
  for (const PlanRecommendation& rec : r.loads) {
    out << "\nPareto frontier at load " << load_name(rec.load) << " (monthly cost against p95 latency, over the points that meet every SLO):\n";
    if (rec.frontier.empty()) out << "  none: no point meets every SLO\n";
    for (std::size_t i : rec.frontier) {
      const PlanPoint& p = r.points[i];
      out << "  " << usd(p.monthly_usd) << "  p95 " << format_quantity(p.p95_s.mean, Dimension::time) << "  " << configuration(p) << "\n";
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
    if (spec.cost.given) points.back()["cost"] = monthly_cost_json(p.cost);
  }
  ordered_json loads = ordered_json::array();
  for (const PlanRecommendation& rec : r.loads) {
    ordered_json entry{{"load", rec.load}};
    entry["recommended"] = rec.point ? ordered_json(*rec.point) : ordered_json(nullptr);
    entry["confirmation"] = rec.confirmed ? ordered_json(*rec.confirmed) : ordered_json(nullptr);
    entry["frontier"] = rec.frontier;
    ordered_json options = ordered_json::array();
    for (const PlanOption& o : rec.per_node_type) {
      options.push_back({{"node_type", o.node_type}, {"point", o.point ? ordered_json(*o.point) : ordered_json(nullptr)},
                         {"closest", o.closest ? ordered_json(*o.closest) : ordered_json(nullptr)}});
    }
    entry["per_node_type"] = options;
    loads.push_back(entry);
  }
  ordered_json guesses = ordered_json::array();
  for (const auto& [type, why] : r.kernel_guesses) guesses.push_back({{"node_type", type}, {"why", why}});
  ordered_json doc{{"plan", spec.file}, {"base", spec.base}, {"loads", loads}, {"points", points}, {"kernel_guesses", guesses}};
  if (spec.cost.given) {
    const OwnershipCost& c = spec.cost;
    static constexpr const char* kBasis[] = {"rent", "reserved", "spot", "own"};
    doc["cost"] = {{"basis", kBasis[static_cast<int>(c.basis)]}, {"years", c.years}, {"pue", c.pue}, {"usd_per_kwh", c.usd_per_kwh},
                   {"colocation_usd_per_kw_month", c.colocation_usd_per_kw_month}};
    if (c.reserved_discount > 0) doc["cost"]["reserved_discount"] = c.reserved_discount;
    if (c.spot_discount > 0) doc["cost"]["spot_discount"] = c.spot_discount;
  }
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
  html::page_begin(out, "Capacity plan: " + spec.file);
  out << "<p>" << html::escape(spec.file) << " over " << html::escape(spec.base) << ": " << r.points.size() << " points simulated, "
      << spec.seeds << " seeds each" << (spec.settle_seeds > 0 ? " (up to " + std::to_string(spec.settle_seeds) + " where not sure)" : std::string())
      << "; a recommendation is confirmed on " << spec.confirm_seeds << " fresh seeds.</p>\n";
  if (spec.cost.given) out << "<p>" << html::escape(cost_basis_text(spec.cost)) << ".</p>\n";

  // The answer first, in words: per load, what to buy, what it costs and how fast it is.
  out << "<h2>Recommendation</h2>\n<ul id=\"recommendation\">\n";
  for (const PlanRecommendation& rec : r.loads) {
    out << "<li>At load " << load_name(rec.load) << ": ";
    if (!rec.point) {
      out << "no configuration in the search space meets every SLO.</li>\n";
      continue;
    }
    const PlanPoint& p = r.points[*rec.point];
    const PlanPoint& c = r.points[*rec.confirmed];
    out << "<b>" << p.nodes << " &times; " << html::escape(p.node_type) << "</b> (" << p.gpus << " GPUs, " << html::escape(p.fabric) << ", policy "
        << html::escape(p.policy) << ") for <b>" << usd_grouped(p.monthly_usd) << " a month</b>: p95 latency " << plus_minus(time_ci(p.p95_s)) << "; on "
        << c.seeds << " fresh seeds";
    for (std::size_t i = 0; i < p.slos.size(); ++i) {
      const SloStats& s = p.slos[i];
      out << (i == 0 ? " " : i + 1 == p.slos.size() ? " and " : ", ") << html::escape(s.name) << " "
          << html::escape(format_slo_value(s.metric, c.slos[i].actual.mean)) << " (target " << (s.at_least ? "&ge; " : "&le; ")
          << html::escape(format_slo_value(s.metric, s.target)) << ")";
    }
    out << ".";
    if (spec.cost.given) out << " " << html::escape(cost_text(spec.cost, p.cost)) << ".";
    if (kernel_guess(r.kernel_guesses, p.node_type) != nullptr) out << " Its GPU's kernel constants are a guess (below).";
    out << "</li>\n";
  }
  out << "</ul>\n";
  for (const auto& [type, why] : r.kernel_guesses) {
    out << "<p class=\"note\">The kernel constants of " << html::escape(type) << "'s GPU are a guess, and so are its times: " << html::escape(why) << ".</p>\n";
  }
  // Side by side: each node type's best, so a choice between them is one look.
  if (!r.loads.empty() && r.loads.front().per_node_type.size() > 1) {
    out << "<h2>Per node type</h2>\n<p>The cheapest configuration of each node type that meets every SLO on its seeds (only the recommendation is "
           "confirmed on fresh seeds), or, where none does, the one closest to it.</p>\n<pre id=\"per-node-type\">";
    for (const PlanRecommendation& rec : r.loads) {
      out << "load " << html::escape(load_name(rec.load)) << "\n";
      for (const PlanOption& o : rec.per_node_type) out << "  " << html::escape(option_text(r, rec, o)) << "\n";
    }
    out << "</pre>\n";
  }

  // The region that matters: up to half again the largest latency target (or the recommended points'
  // p95), so that a few slow configurations do not squash it; slower points sit on the top edge.
  double latency_target = 0, max_cost = 1, min_cost = 0, region = 0;
  for (const PlanPoint& p : r.points) {
    for (const SloStats& s : p.slos) {
      if (s.metric.rfind("latency", 0) == 0 && !s.at_least) latency_target = std::max(latency_target, s.target);
    }
    if (!ran(p) || p.confirmation) continue;
    max_cost = std::max(max_cost, p.monthly_usd);
    if (p.monthly_usd > 0) min_cost = min_cost == 0 ? p.monthly_usd : std::min(min_cost, p.monthly_usd);
  }
  for (const PlanRecommendation& rec : r.loads) {
    if (rec.point) region = std::max(region, r.points[*rec.point].p95_s.mean);
  }
  for (const PlanPoint& p : r.points) {
    if (region == 0 && ran(p) && !p.confirmation) region = std::max(region, p.p95_s.mean);  // nothing recommended: every point
  }
  const html::Axis y = html::seconds_axis(std::max({1.5 * latency_target, 1.25 * region, 1e-3}), "p95 latency");
  // Costs spread over more than a factor of 20 (a few GPUs to a few hundred) on a log scale, else the cheap
  // points, the ones a buyer weighs, would crowd the axis's first few percent.
  html::Axis x{.lo = 0, .hi = html::nice_ceiling(max_cost * 1.05), .label = "monthly cost", .format = usd_grouped};
  if (min_cost > 0 && max_cost / min_cost > 20) {
    // From the 1-2-5 step at or below the cheapest point to the one at or above the dearest, ticked at each.
    std::vector<double> steps;
    for (double decade = std::pow(10.0, std::floor(std::log10(min_cost))); decade <= 10 * max_cost; decade *= 10) {
      for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * decade);
    }
    const auto first = std::prev(std::upper_bound(steps.begin(), steps.end(), min_cost * (1 + 1e-9)));
    const auto last = std::lower_bound(steps.begin(), steps.end(), max_cost * (1 - 1e-9));
    x = {.lo = *first, .hi = *last, .label = "monthly cost (log scale)", .format = usd_grouped, .log = true};
    for (auto step = first; step <= last; ++step) x.ticks.emplace_back(*step, usd_grouped(*step));
  }
  // A chart a load, on the same axes, each point coloured by its node type (the question a buyer weighing
  // node types asks), the frontier a dark line through the points that meet every SLO.
  std::vector<std::string> node_types;  // in the search's order: a node type keeps its colour on every chart
  for (const PlanPoint& p : r.points) {
    if (std::find(node_types.begin(), node_types.end(), p.node_type) == node_types.end()) node_types.push_back(p.node_type);
  }
  const auto type_index = [&](const std::string& type) { return static_cast<std::size_t>(std::find(node_types.begin(), node_types.end(), type) - node_types.begin()); };
  const auto color_of = [&](const std::string& type) { return html::color(type_index(type)); };
  constexpr const char* kFrontier = "#333333";
  std::size_t above = 0;
  for (std::size_t l = 0; l < r.loads.size(); ++l) {
    const PlanRecommendation& rec = r.loads[l];
    html::SvgChart chart(l == 0 ? "frontier" : "frontier-" + std::to_string(l + 1), "Monthly cost against p95 latency at load " + load_name(rec.load), x, y, 640, 400);
    // Every point has the plan's SLOs: the first one's are the targets to draw.
    for (const SloStats& s : r.points.empty() ? std::vector<SloStats>{} : r.points.front().slos) {
      if (s.metric.rfind("latency", 0) == 0 && !s.at_least) chart.guide(x.lo, s.target, x.hi, s.target, "#d62728", true);
    }
    std::vector<std::pair<double, double>> frontier;
    for (std::size_t i : rec.frontier) frontier.emplace_back(r.points[i].monthly_usd, std::min(r.points[i].p95_s.mean, y.hi));
    chart.polyline(frontier, kFrontier, "Pareto frontier, load " + load_name(rec.load));
    std::vector<bool> shown(node_types.size(), false);
    for (const PlanPoint& p : r.points) {
      if (p.load != rec.load || !ran(p) || p.confirmation) continue;
      const bool clipped = p.p95_s.mean > y.hi;
      above += clipped ? 1 : 0;
      chart.circle(p.monthly_usd, std::min(p.p95_s.mean, y.hi), clipped ? 3 : 4, color_of(p.node_type), p.passes,
                   configuration(p) + ": p95 " + time_ci(p.p95_s) + (clipped ? " (above the chart)" : "") + "; " + p.verdict);
      shown[type_index(p.node_type)] = true;
    }
    if (rec.point) {
      const PlanPoint& best = r.points[*rec.point];
      chart.circle(best.monthly_usd, best.p95_s.mean, 9, color_of(best.node_type), false, "recommended: " + configuration(best));
    }
    std::vector<std::pair<std::string, const char*>> legend;
    for (std::size_t t = 0; t < node_types.size(); ++t) {
      if (shown[t]) legend.emplace_back(node_types[t], html::color(t));
    }
    legend.emplace_back("Pareto frontier", kFrontier);
    chart.legend(legend);
    chart.write(out);
  }
  out << "<p class=\"note\">A chart a load; colour: node type; filled: meets every SLO; hollow: does not; ringed: recommended; dark line: the Pareto "
         "frontier of the points that meet every SLO (each point faster than the cheaper ones beyond both confidence intervals); dashed red: the "
         "latency targets.</p>\n";
  if (above > 0) {
    out << "<p class=\"note\">" << above << " point" << (above == 1 ? " is" : "s are") << " slower than the chart's top (" << html::escape(y.ticks.back().second)
        << ") and drawn on its edge; the table has their p95.</p>\n";
  }

  out << "<h2>Every configuration simulated</h2>\n<table id=\"points\"><tr><th>load</th><th>configuration</th><th>$/month</th><th>p95 latency</th><th>GPU utilization</th><th>verdict</th></tr>\n";
  for (const PlanPoint& p : r.points) {
    if (!ran(p)) continue;
    char util[16];
    std::snprintf(util, sizeof util, "%.1f %%", 100 * p.utilization.mean);
    out << "<tr><td>" << load_name(p.load) << "</td><td>" << html::escape(configuration(p)) << "</td><td class=\"n\">" << usd_grouped(p.monthly_usd)
        << "</td><td class=\"n\">" << plus_minus(time_ci(p.p95_s)) << "</td><td class=\"n\">" << util << "</td><td>" << (p.confirmation ? "confirmation: " : "")
        << html::escape(p.verdict) << "</td></tr>\n";
  }
  out << "</table>\n";
  std::vector<const PlanPoint*> never;
  for (const PlanPoint& p : r.points) {
    if (!ran(p)) never.push_back(&p);
  }
  if (!never.empty()) {
    out << "<h2>Configurations that could not run</h2>\n<p class=\"note\">Not plotted: no cluster of these could hold the work.</p>\n"
           "<table id=\"infeasible\"><tr><th>load</th><th>configuration</th><th>why</th></tr>\n";
    for (const PlanPoint* p : never) {
      out << "<tr><td>" << load_name(p->load) << "</td><td>" << html::escape(configuration(*p)) << "</td><td>" << html::escape(p->verdict) << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  html::page_end(out);
}

}  // namespace fleetsim
