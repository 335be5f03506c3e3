// The HTML reports: one self-contained page per run, comparison, plan or validation, with inline
// SVG charts (svg_chart.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "fleetsim/compute.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/time_bins.hpp"
#include "fleetsim/units.hpp"
#include "gpu_lanes.hpp"
#include "readable.hpp"
#include "serving_parts.hpp"
#include "training_parts.hpp"
#include "svg_chart.hpp"

namespace fleetsim {
namespace {

constexpr std::size_t kBins = kOverTimeBins;  // time bins of the over-time charts
constexpr std::uint32_t kGanttRows = 64;    // GPUs drawn in the Gantt chart
constexpr std::size_t kGanttMarks = 40000;  // task and load bars drawn at most
constexpr std::size_t kHeatmapLinks = 24;   // links in each tier's heatmap
constexpr std::size_t kHeatmapBins = 100;

std::string seconds(double s) { return format_quantity(s, Dimension::time); }

html::Axis time_axis(double end_s) { return html::seconds_axis(end_s, "simulated time"); }

html::Axis percent_axis(std::string label) {
  return {.lo = 0, .hi = 100, .label = std::move(label), .format = [](double v) {
            char b[16];
            std::snprintf(b, sizeof b, "%.0f %%", v);
            return std::string(b);
          }};
}

void row(std::ostream& out, std::string_view name, const std::string& value) {
  out << "<tr><th>" << html::escape(name) << "</th><td>" << html::escape(value) << "</td></tr>\n";
}

std::string pct(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %%", 100 * fraction);
  return b;
}

void summary_table(std::ostream& out, const Summary& s) {
  out << "<table>\n";
  row(out, "makespan", seconds(s.makespan_s));
  row(out, "workflows", std::to_string(s.workflows.completed) + " completed, " + std::to_string(s.workflows.failed) + " failed, " +
                            std::to_string(s.workflows.running) + " running, " + std::to_string(s.workflows.queued) + " queued");
  row(out, "tasks", std::to_string(s.tasks.completed) + " completed of " + std::to_string(s.tasks.submitted));
  // A training job's answer on the first screen: how long an iteration took beside the rest, against alone.
  for (const TrainingResult& r : s.training) {
    if (r.iteration_s.count == 0) continue;
    char b[64];
    std::snprintf(b, sizeof b, "%.2fx its time alone, %.1f %% MFU", r.slowdown, 100 * r.mfu);
    std::string elastic;  // an elastic job: where its iterations ran and what moving cost it
    for (std::size_t i = 0; i < r.completed_at_dp.size(); ++i) {
      elastic += (i == 0 ? "; elastic: " : ", ") + std::to_string(r.completed_at_dp[i]) + " at DP " + std::to_string(r.iteration->elastic_dp[i]);
    }
    if (!elastic.empty()) elastic += ", " + std::to_string(r.restarts) + " restarts of " + seconds(r.iteration->elastic_restart_s);
    row(out, "training " + r.iteration->job, seconds(r.iteration_s.mean) + " an iteration (mean), " + b + elastic);
  }
  row(out, "GPU utilization", pct(s.gpu_utilization));
  row(out, "VRAM utilization", pct(s.vram_utilization) + " (peak " + pct(s.vram_peak_utilization) + " of a GPU)");
  row(out, "weight loads", std::to_string(s.weight_loads) + " (" + format_quantity(s.weight_bytes_loaded, Dimension::bytes) + ", " +
                               seconds(s.weight_load_s) + " in all), " + std::to_string(s.evictions) + " evictions");
  row(out, "cost", dollars(s.cost_usd));
  row(out, "energy", format_number(s.energy_j / 3.6e6) + " kWh");
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", s.fairness);
  row(out, "fairness (Jain)", b);
  out << "</table>\n<table><tr><th>tenant</th><th>completed</th><th>mean</th><th>p50</th><th>p95</th><th>p99</th><th>task wait</th></tr>\n";
  for (const TenantSummary& t : s.tenants) {
    out << "<tr><td>" << html::escape(t.name) << "</td><td class=\"n\">" << t.workflows.completed << "</td><td class=\"n\">"
        << seconds(t.latency_s.mean) << "</td><td class=\"n\">" << seconds(t.latency_s.p50) << "</td><td class=\"n\">" << seconds(t.latency_s.p95)
        << "</td><td class=\"n\">" << seconds(t.latency_s.p99) << "</td><td class=\"n\">" << seconds(t.mean_wait_s) << "</td></tr>\n";
  }
  out << "</table>\n";
  if (!s.slos.empty()) {
    out << "<table><tr><th>SLO</th><th>target</th><th>actual</th><th></th></tr>\n";
    for (const SloResult& slo : s.slos) {
      out << "<tr><td>" << html::escape(slo_scope(slo) + " " + slo.metric) << "</td><td>"
          << (slo.at_least ? "&ge; " : "&le; ") << html::escape(format_slo_value(slo.metric, slo.target)) << "</td><td>"
          << html::escape(format_slo_value(slo.metric, slo.actual)) << "</td><td>" << (slo.met ? "met" : "<b>missed</b>") << "</td></tr>\n";
    }
    out << "</table>\n";
  }
}

// Why a task's compute takes what it takes, for its bar's tooltip.
std::string compute_parts(const TaskRecord& t) {
  if (t.compute_bound_s + t.memory_bound_s + t.fixed_s <= 0) return "";
  return "; compute " + seconds(t.compute_bound_s) + " compute-bound, " + seconds(t.memory_bound_s) + " memory-bound, " + seconds(t.fixed_s) +
         " launches and host";
}

// The Gantt chart of a run with more bars than a page can hold: per GPU row and time bin, the share of
// the time its tasks held the GPU (darker: busier; time-sliced tasks add up, capped at fully busy).
void binned_gantt(std::ostream& out, html::SvgChart& chart, const RunResult& run, std::uint32_t rows, std::size_t bars) {
  const Trace& trace = run.trace;
  const double end = run.summary.end_s;
  std::vector<TimeBins> busy(rows, TimeBins(end, kBins));
  for (const TaskRecord& t : trace.tasks) {
    // A batch holds its GPU once: its leader's time.
    const auto self = static_cast<std::uint32_t>(&t - trace.tasks.data());
    if (t.start_s == kNever || (t.batched_with != 0 && t.batched_with != self + 1)) continue;
    const double until = t.end_s != kNever ? t.end_s : end;
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      if (const std::uint32_t g = index(trace.gpus[t.gpu_begin + i]); g < rows) busy[g].add(gang_start_s(t), until, 1);
    }
  }
  for (const LeftGang& left : trace.left_gangs) {
    for (std::uint32_t i = 0; i < left.gpu_count; ++i) {
      if (const std::uint32_t g = index(trace.gpus[left.gpu_begin + i]); g < rows) busy[g].add(left.start_s, left.end_s, 1);
    }
  }
  const double width = std::max(end, 1e-9) / static_cast<double>(kBins);
  for (std::uint32_t g = 0; g < rows; ++g) {
    for (std::size_t b = 0; b < kBins; ++b) {
      const double share = std::min(1.0, busy[g].mean(b));
      if (share <= 0) continue;
      const double from = static_cast<double>(b) * width;
      chart.rect(from, from + width, rows - g - 0.9, rows - g - 0.1, html::color(0),
                 run.cluster.gpu_name(make_id<GpuId>(g)) + ": " + pct(share) + " busy, " + seconds(from) + " to " + seconds(from + width),
                 0.15 + 0.85 * share);
    }
  }
  chart.write(out);
  out << "<p class=\"note\">Shown: each GPU's share of time busy in " << kBins << " time bins (darker: busier); the "
      << bars << " task and weight-load bars of " << (run.cluster.gpu_count() > rows ? "these GPUs" : "this run")
      << " are too many to draw one by one (at most " << kGanttMarks << ").";
  if (run.cluster.gpu_count() > rows) out << " The first " << rows << " of " << run.cluster.gpu_count() << " GPUs.";
  out << "</p>\n";
}

void gantt(std::ostream& out, const Scenario& sc, const RunResult& run) {
  const Trace& trace = run.trace;
  const double end = run.summary.end_s;
  const std::uint32_t rows = std::min(run.cluster.gpu_count(), kGanttRows);
  html::Axis y{.lo = 0, .hi = static_cast<double>(rows), .label = "GPU"};
  const std::uint32_t every = rows <= 32 ? 1 : rows / 16;
  for (std::uint32_t g = 0; g < rows; g += every) y.ticks.emplace_back(rows - g - 0.5, run.cluster.gpu_name(make_id<GpuId>(g)));
  const double height_px = std::max(120.0, 14.0 * rows);
  // Too many bars to draw (a large run): each GPU's row shows its share of time busy per time bin.
  std::size_t bars = 0;
  for (const GpuId g : trace.gpus) bars += index(g) < rows;
  for (const WeightLoad& w : trace.weight_loads) bars += index(w.gpu) < rows;
  if (bars > kGanttMarks) {
    html::SvgChart chart("gantt", "GPUs busy over time (darker: busier)", time_axis(end), y, 720, height_px);
    binned_gantt(out, chart, run, rows, bars);
    return;
  }
  html::SvgChart chart("gantt", "Tasks on GPUs (colour: tenant; darker: collective; grey: weight loads)", time_axis(end), y, 720, height_px);
  // Tasks sharing a GPU at once split its row into lanes.
  const GpuLanes lanes = gpu_lanes(trace, run.cluster.gpu_count(), end);
  const auto band = [&](std::uint32_t entry) {
    const std::uint32_t g = index(trace.gpus[entry]);
    const double height = 0.8 / lanes.per_gpu[g], top = rows - g - 0.1 - lanes.lane[entry] * height;
    return std::pair{top - height, top};
  };
  std::size_t marks = 0;
  for (const TaskRecord& t : trace.tasks) {
    if (t.start_s == kNever || marks >= kGanttMarks) continue;
    const double until = t.end_s != kNever ? t.end_s : end;
    const std::string tip = sc.workflows[t.workflow].tasks[t.task].name + " (" + sc.workflows[t.workflow].id + " #" +
                            std::to_string(index(t.instance)) + ", " + sc.tenants[index(t.tenant)].name + "): " + seconds(t.start_s) + " to " +
                            seconds(until) + compute_parts(t);
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      const std::uint32_t g = index(trace.gpus[t.gpu_begin + i]);
      if (g >= rows) continue;
      const auto [lo, hi] = band(t.gpu_begin + i);
      chart.rect(gang_start_s(t), until, lo, hi, html::color(index(t.tenant)), tip);
      // The gang's collective, darker.
      if (t.comm_start_s != kNever) chart.rect(t.comm_start_s, until, lo, hi, "#000", "collective of " + tip, 0.3);
      ++marks;
    }
  }
  // Gangs before a resize or a stop.
  for (const LeftGang& left : trace.left_gangs) {
    const TaskRecord& t = trace.tasks[index(left.task)];
    const std::string tip = sc.workflows[t.workflow].tasks[t.task].name + " (" + sc.workflows[t.workflow].id + " #" +
                            std::to_string(index(t.instance)) + ", " + sc.tenants[index(t.tenant)].name + ") on " +
                            std::to_string(left.gpu_count) + " GPUs until " + (left.stopped ? "stopped" : "resized") + ": " + seconds(left.start_s) + " to " + seconds(left.end_s);
    for (std::uint32_t i = 0; i < left.gpu_count && marks < kGanttMarks; ++i) {
      const std::uint32_t g = index(trace.gpus[left.gpu_begin + i]);
      if (g >= rows) continue;
      const auto [lo, hi] = band(left.gpu_begin + i);
      chart.rect(left.start_s, left.end_s, lo, hi, html::color(index(t.tenant)), tip);
      ++marks;
    }
  }
  for (const WeightLoad& w : trace.weight_loads) {
    const std::uint32_t g = index(w.gpu);
    if (g >= rows || marks >= kGanttMarks) continue;
    // The lower part of its task's lane (of the whole row when the load belonged to a stopped run).
    const auto entry = load_entry(trace, w);
    const auto [lo, hi] = entry ? band(*entry) : std::pair{rows - g - 0.9, rows - g - 0.1};
    chart.rect(w.start_s, w.end_s != kNever ? w.end_s : end, lo, lo + 0.375 * (hi - lo), "#555",
               "weight load " + format_quantity(w.bytes, Dimension::bytes));
    ++marks;
  }
  std::vector<std::pair<std::string, const char*>> legend;
  for (std::size_t t = 0; t < sc.tenants.size() && t < 10; ++t) legend.emplace_back(sc.tenants[t].name, html::color(t));
  chart.legend(legend);
  chart.write(out);
  if (run.cluster.gpu_count() > rows) {
    out << "<p class=\"note\">Shown: the first " << rows << " of " << run.cluster.gpu_count() << " GPUs.</p>\n";
  }
  if (marks >= kGanttMarks) {
    out << "<p class=\"note\">Shown: the first " << kGanttMarks << " bars (tasks in the order they were created); later ones are left out.</p>\n";
  }
}

void utilization_and_queue(std::ostream& out, const RunResult& run) {
  const double end = run.summary.end_s;
  TimeBins busy(end, kBins);
  const TimeBins waiting = waiting_tasks(run.trace, end, kBins);
  for (const TaskRecord& t : run.trace.tasks) {
    if (t.ready_s != kNever && t.start_s != kNever) busy.add(gang_start_s(t), t.end_s != kNever ? t.end_s : end, t.gpu_count);
  }
  for (const LeftGang& left : run.trace.left_gangs) busy.add(left.start_s, left.end_s, left.gpu_count);
  html::SvgChart util("utilization", "GPUs busy (share of the cluster, time-averaged per bin)", time_axis(end), percent_axis("GPUs busy"));
  const auto series = busy.series(100.0 / std::max<std::uint32_t>(run.cluster.gpu_count(), 1));
  util.polyline(series, html::color(0), "GPUs busy");
  util.write(out);

  double most = 1;
  for (std::size_t b = 0; b < waiting.size(); ++b) most = std::max(most, waiting.mean(b));
  html::SvgChart queue("queue", "Ready tasks waiting for GPUs (time-averaged per bin)", time_axis(end),
                       {.lo = 0, .hi = 4 * std::ceil(most * 1.1 / 4), .label = "tasks waiting"});
  queue.polyline(waiting.series(1), html::color(3), "tasks waiting");
  queue.write(out);
}

void vram(std::ostream& out, const RunResult& run) {
  if (run.vram_samples.empty()) {
    out << "<p class=\"note\">No VRAM timeline: the run did not record samples.</p>\n";
    return;
  }
  const double end = run.summary.end_s;
  const std::uint32_t gpus = run.cluster.gpu_count();
  TimeBins mean(end, kBins);
  std::vector<double> peak(kBins, 0.0), used(gpus, 0.0), since(gpus, 0.0);
  const double width = std::max(end, 1e-9) / kBins;
  auto capacity = [&](std::uint32_t g) { return run.cluster.gpu_type(make_id<GpuId>(g)).vram_bytes; };
  // A bin's peak: the fullest GPU at the bin's start or at any change within it.
  const auto fullest = [&] {
    double f = 0;
    for (std::uint32_t g = 0; g < gpus; ++g) f = std::max(f, used[g] / capacity(g));
    return f;
  };
  std::size_t bin = 0;
  for (const VramSample& s : run.vram_samples) {
    const auto b = std::min<std::size_t>(kBins - 1, static_cast<std::size_t>(s.time_s / width));
    for (; bin < b; ++bin) peak[bin + 1] = fullest();
    const std::uint32_t g = index(s.gpu);
    mean.add(since[g], s.time_s, used[g] / capacity(g));
    used[g] = s.used_bytes;
    since[g] = s.time_s;
    peak[b] = std::max(peak[b], used[g] / capacity(g));
  }
  for (; bin + 1 < kBins; ++bin) peak[bin + 1] = fullest();
  for (std::uint32_t g = 0; g < gpus; ++g) mean.add(since[g], end, used[g] / capacity(g));
  std::vector<std::pair<double, double>> peaks;
  for (std::size_t b = 0; b < kBins; ++b) peaks.emplace_back(mean.mid(b), 100 * peak[b]);
  html::SvgChart chart("vram", "VRAM in use: mean over GPUs, and the fullest GPU's peak per bin", time_axis(end), percent_axis("VRAM used"));
  chart.polyline(mean.series(100.0 / gpus), html::color(2), "mean over GPUs");
  chart.polyline(peaks, html::color(4), "fullest GPU (at the bin's start or a change within it)");
  chart.legend({{"mean", html::color(2)}, {"peak", html::color(4)}});
  chart.write(out);
}

// The billing rate as a step line, with the cost accrued in the title.
void cost_over_time(std::ostream& out, const RunResult& run) {
  if (run.cost_samples.empty()) return;
  const double end = run.summary.end_s;
  std::vector<std::pair<double, double>> steps;
  double top = 1e-9;
  for (std::size_t i = 0; i < run.cost_samples.size(); ++i) {
    const CostSample& c = run.cost_samples[i];
    if (i > 0) steps.emplace_back(c.time_s, run.cost_samples[i - 1].usd_per_hour);
    steps.emplace_back(c.time_s, c.usd_per_hour);
    top = std::max(top, c.usd_per_hour);
  }
  steps.emplace_back(end, run.cost_samples.back().usd_per_hour);
  char title[96];
  std::snprintf(title, sizeof title, "Billing rate over time ($%.2f in all)", run.summary.cost_usd);
  html::SvgChart chart("cost", title, time_axis(end), {.lo = 0, .hi = top * 1.1, .label = "$ per hour", .format = [](double v) {
                                                         char b[24];
                                                         std::snprintf(b, sizeof b, "$%.0f", v);
                                                         return std::string(b);
                                                       }});
  chart.polyline(steps, html::color(5), "billing rate");
  chart.write(out);
}

void latency_cdf(std::ostream& out, const Scenario& sc, const RunResult& run) {
  std::vector<std::vector<double>> latencies(sc.tenants.size());
  double lo = 1e300, hi = 0;
  for (const InstanceRecord& i : run.trace.instances) {
    // What the summary's percentiles count: completed workflows that arrived past the warm-up.
    const std::optional<double> latency = measured_latency(sc, i);
    if (!latency) continue;
    const double l = std::max(*latency, 1e-9);
    latencies[index(i.tenant)].push_back(l);
    lo = std::min(lo, l);
    hi = std::max(hi, l);
  }
  if (hi == 0) {
    out << "<p class=\"note\">No workflow completed: no latency distribution.</p>\n";
    return;
  }
  html::SvgChart chart("latency-cdf", "Workflow latency, cumulative distribution per tenant", html::time_axis(lo, hi, "workflow latency (arrival to last task)"),
                       {.lo = 0, .hi = 1, .label = sc.warmup_s > 0 ? "fraction of completed workflows past the warm-up" : "fraction of completed workflows"});
  std::vector<std::pair<std::string, const char*>> legend;
  for (std::size_t t = 0; t < latencies.size(); ++t) {
    auto& v = latencies[t];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    chart.polyline(html::cdf_points(v), html::color(t), sc.tenants[t].name);
    legend.emplace_back(sc.tenants[t].name, html::color(t));
  }
  chart.legend(legend);
  chart.write(out);
}

// One tier's heatmap: its `links` (ranked already) over time, darker where busier.
void link_heatmap_rows(std::ostream& out, const RunResult& run, const std::string& id, const std::string& title, const std::vector<std::uint32_t>& rows_links,
                       const std::vector<double>& saturated_s) {
  const auto& links = run.topology.links();
  std::vector<std::int32_t> row_of(links.size(), -1);
  for (std::size_t r = 0; r < rows_links.size(); ++r) row_of[rows_links[r]] = static_cast<std::int32_t>(r);
  const double end = run.summary.end_s;
  std::vector<TimeBins> bins(rows_links.size(), TimeBins(end, kHeatmapBins));
  std::vector<double> rate(links.size(), 0.0), since(links.size(), 0.0);
  for (const LinkSample& s : run.link_samples) {
    if (row_of[s.link] < 0) continue;
    bins[row_of[s.link]].add(since[s.link], s.time_s, rate[s.link] / links[s.link].capacity_Bps);
    rate[s.link] = s.rate_Bps;
    since[s.link] = s.time_s;
  }
  const auto rows = static_cast<double>(rows_links.size());
  html::Axis y{.lo = 0, .hi = rows, .label = "link"};
  for (std::size_t r = 0; r < rows_links.size(); ++r) {
    bins[r].add(since[rows_links[r]], end, rate[rows_links[r]] / links[rows_links[r]].capacity_Bps);
    y.ticks.emplace_back(rows - static_cast<double>(r) - 0.5, run.topology.link_name(rows_links[r]));
  }
  html::SvgChart chart(id, title, time_axis(end), y, 720, std::max(100.0, 14.0 * rows));
  chart.color_scale("#08519c", {{0.25, "25 % busy"}, {0.5, "50 %"}, {0.75, "75 %"}, {1.0, "100 %"}});
  const double width = std::max(end, 1e-9) / kHeatmapBins;
  for (std::size_t r = 0; r < rows_links.size(); ++r) {
    const std::string name = run.topology.link_name(rows_links[r]);
    const std::string full = saturated_s[rows_links[r]] > 0 ? ", at full rate " + format_quantity(saturated_s[rows_links[r]], Dimension::time) + " in all" : "";
    for (std::size_t b = 0; b < kHeatmapBins; ++b) {
      const double u = std::clamp(bins[r].mean(b), 0.0, 1.0);
      if (u <= 0) continue;
      chart.rect(static_cast<double>(b) * width, static_cast<double>(b + 1) * width, rows - static_cast<double>(r) - 1, rows - static_cast<double>(r),
                 "#08519c", name + ": " + pct(u) + full, std::max(u, 0.04));
    }
  }
  chart.write(out);
}

// Link utilization over time, tier by tier (the fabric's switch links, the NICs, the links inside nodes),
// each tier's links ranked by how long they ran at full rate (where flows contend), then by bytes: a
// contended spine shows above busy but uncontended NVLink.
void link_heatmap(std::ostream& out, const RunResult& run) {
  if (run.link_samples.empty()) {
    out << "<p class=\"note\">No link timeline: no transfer crossed a link, or the run did not record samples.</p>\n";
    return;
  }
  const auto& links = run.topology.links();
  std::vector<double> saturated_s(links.size(), 0.0), rate(links.size(), 0.0), since(links.size(), 0.0);
  for (const LinkSample& s : run.link_samples) {
    if (rate[s.link] >= 0.99 * links[s.link].capacity_Bps) saturated_s[s.link] += s.time_s - since[s.link];
    rate[s.link] = s.rate_Bps;
    since[s.link] = s.time_s;
  }
  for (std::uint32_t l = 0; l < links.size(); ++l) {
    if (rate[l] >= 0.99 * links[l].capacity_Bps) saturated_s[l] += run.summary.end_s - since[l];
  }
  struct Tier {
    const char* id;
    const char* name;
    bool (*holds)(LinkClass);
  };
  const Tier tiers[] = {
      {"links-fabric", "Fabric (switch-to-switch) links", [](LinkClass c) { return c == LinkClass::fabric; }},
      {"links-nic", "NIC links", [](LinkClass c) { return c == LinkClass::nic; }},
      {"links", "Links inside nodes (GPU, host, storage)", [](LinkClass c) { return c != LinkClass::fabric && c != LinkClass::nic; }},
  };
  for (const Tier& tier : tiers) {
    std::vector<std::uint32_t> ranked;
    for (std::uint32_t l = 0; l < links.size(); ++l) {
      if (run.link_bytes[l] > 0 && tier.holds(links[l].cls)) ranked.push_back(l);
    }
    if (ranked.empty()) continue;
    std::stable_sort(ranked.begin(), ranked.end(), [&](std::uint32_t a, std::uint32_t b) {
      return std::tie(saturated_s[a], run.link_bytes[a]) > std::tie(saturated_s[b], run.link_bytes[b]);
    });
    const std::size_t carried = ranked.size();
    if (ranked.size() > kHeatmapLinks) ranked.resize(kHeatmapLinks);
    const std::string title = std::string(tier.name) + ": " + (carried > ranked.size() ? "the " + std::to_string(ranked.size()) + " of " + std::to_string(carried) : "all " + std::to_string(carried)) +
                              " that carried bytes, longest at full rate first, then by bytes; darker: busier";
    link_heatmap_rows(out, run, tier.id, title, ranked, saturated_s);
  }
}

// Predicted against measured task durations on log-log axes, with y = x and +-10 % guides.
html::SvgChart trace_diff_chart(const std::string& title, const TraceDiff& diff) {
  double lo = 1e300, hi = 0;
  for (const TaskError& e : diff.tasks) {
    lo = std::min({lo, e.predicted_s, e.measured_s});
    hi = std::max({hi, e.predicted_s, e.measured_s});
  }
  if (diff.tasks.empty() || !(lo > 0)) lo = 1e-3, hi = 1;
  // Whole decades around the points.
  const double d_lo = std::pow(10.0, std::floor(std::log10(lo)));
  const double d_hi = std::max(std::pow(10.0, std::ceil(std::log10(hi))), d_lo * 10);
  const auto decade = [](double v) {
    char b[16];
    std::snprintf(b, sizeof b, "1e%d", static_cast<int>(std::lround(std::log10(v))));
    return std::string(b);
  };
  char subtitle[160];
  std::snprintf(subtitle, sizeof subtitle, "%s: %zu tasks, median error %.1f%%, makespan error %+.1f%%; dashed: +-10%%", title.c_str(),
                diff.tasks.size(), 100 * diff.median_abs_error, 100 * diff.makespan_error());
  html::SvgChart chart("scatter", subtitle, {.lo = d_lo, .hi = d_hi, .label = "measured task duration (s)", .format = decade, .log = true},
                       {.lo = d_lo, .hi = d_hi, .label = "predicted (s)", .format = decade, .log = true}, 420, 420);
  chart.guide(d_lo, d_lo, d_hi, d_hi, "#444", false);
  chart.guide(d_lo, d_lo * 1.1, d_hi / 1.1, d_hi, "#aaa", true);
  chart.guide(d_lo * 1.1, d_lo, d_hi, d_hi / 1.1, "#aaa", true);
  for (const TaskError& e : diff.tasks) {
    char tip[96];
    std::snprintf(tip, sizeof tip, "measured %.4g s, predicted %.4g s (%+.1f%%)", e.measured_s, e.predicted_s, 100 * e.relative());
    chart.circle(e.measured_s, e.predicted_s, 3.5, html::color(0), true, tip);
  }
  return chart;
}

}  // namespace

void write_trace_diff_svg(std::ostream& out, const std::string& title, const TraceDiff& diff) { trace_diff_chart(title, diff).write(out); }

void write_validation_html(std::ostream& out, const std::string& title, const std::string& table, const TraceDiff& diff) {
  html::page_begin(out, title);
  trace_diff_chart("predicted against measured", diff).write(out);
  out << "<pre>" << html::escape(table) << "</pre>\n";
  html::page_end(out);
}

void write_run_report_html(std::ostream& out, const Scenario& scenario, const RunResult& run) {
  html::page_begin(out, "fleetsim run: " + scenario.name);
  out << "<p>" << html::escape(scenario.description) << "</p>\n<p>Policy <b>" << html::escape(run.summary.policy) << "</b>, seed "
      << run.summary.seed << "; " << run.cluster.node_count() << " nodes, " << run.cluster.gpu_count() << " GPUs.</p>\n";
  for (const std::string& b : borrowed_kernel_constants(scenario.cluster, scenario.workflows, !scenario.serving.empty())) {
    out << "<p class=\"note\">Borrowed constants: " << html::escape(b) << ".</p>\n";
  }
  out << "<h2>Summary</h2>\n";
  summary_table(out, run.summary);
  out << "<h2>GPUs</h2>\n";
  gantt(out, scenario, run);
  utilization_and_queue(out, run);
  vram(out, run);
  cost_over_time(out, run);
  out << "<h2>Latency</h2>\n";
  latency_cdf(out, scenario, run);
  out << "<h2>Network</h2>\n";
  link_heatmap(out, run);
  if (!run.summary.training.empty()) {
    out << "<h2>Training</h2>\n";
    std::ostringstream text;
    write_training_results(text, run.summary.training);
    out << "<pre style=\"white-space: pre-wrap\">" << html::escape(text.str()) << "</pre>\n";
  }
  for (std::size_t k = 0; k < run.summary.serving.size(); ++k) {
    const ServingResult& r = run.summary.serving[k];
    out << "<h2>Serving: " << html::escape(r.deployment->name) << "</h2>\n";
    write_serving_sections(out, *r.deployment, r, "-" + std::to_string(k + 1), "h3");
  }
  html::page_end(out);
}

}  // namespace fleetsim
