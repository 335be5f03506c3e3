#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "fleetsim/report.hpp"

namespace fleetsim {
namespace {

std::string task_label(const Scenario& sc, const TaskRecord& r) {
  return sc.workflows[r.workflow].id + "#" + std::to_string(index(r.instance)) + "/" + sc.workflows[r.workflow].tasks[r.task].name;
}

}  // namespace

void write_schedule_text(std::ostream& out, const Scenario& sc, const RunResult& plan) {
  std::vector<std::vector<std::uint32_t>> by_gpu(plan.cluster.gpu_count());
  for (std::uint32_t i = 0; i < plan.trace.tasks.size(); ++i) {
    const TaskRecord& r = plan.trace.tasks[i];
    if (r.start_s == kNever) continue;
    for (std::uint32_t m = 0; m < r.gpu_count; ++m) by_gpu[index(plan.trace.gpus[r.gpu_begin + m])].push_back(i);
  }
  char line[256];
  for (std::uint32_t g = 0; g < by_gpu.size(); ++g) {
    std::vector<std::uint32_t>& tasks = by_gpu[g];
    if (tasks.empty()) continue;
    std::stable_sort(tasks.begin(), tasks.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return plan.trace.tasks[a].start_s < plan.trace.tasks[b].start_s; });
    out << plan.cluster.gpu_name(make_id<GpuId>(g)) << " (" << tasks.size() << " tasks)\n";
    for (std::uint32_t i : tasks) {
      const TaskRecord& r = plan.trace.tasks[i];
      std::snprintf(line, sizeof line, "  %12.6f %12.6f  %-9s ", r.start_s, r.end_s, std::string(task_status_name(r.status)).c_str());
      out << line << task_label(sc, r) << (r.gpu_count > 1 ? " (gang of " + std::to_string(r.gpu_count) + ")" : "") << '\n';
    }
  }
}

void write_trace_diff_text(std::ostream& out, const TraceDiff& diff) {
  char line[256];
  std::snprintf(line, sizeof line, "tasks compared      %zu\n", diff.tasks.size());
  out << line;
  std::snprintf(line, sizeof line, "task error          median %.1f%%  p90 %.1f%%  max %.1f%%  mean (MAPE) %.1f%%\n",
                100 * diff.median_abs_error, 100 * diff.p90_abs_error, 100 * diff.max_abs_error, 100 * diff.mean_abs_error);
  out << line;
  std::snprintf(line, sizeof line, "makespan            predicted %.6g s  measured %.6g s  error %+.1f%%\n", diff.predicted_makespan_s,
                diff.measured_makespan_s, 100 * diff.makespan_error());
  out << line;
}

void write_trace_diff_csv(std::ostream& out, const Scenario& sc, const Trace& measured, const TraceDiff& diff) {
  out << "task,predicted_s,measured_s,relative_error\n";
  char line[128];
  for (const TaskError& e : diff.tasks) {
    std::snprintf(line, sizeof line, ",%.9g,%.9g,%.6f\n", e.predicted_s, e.measured_s, e.relative());
    out << task_label(sc, measured.tasks[e.record]) << line;
  }
}

}  // namespace fleetsim

namespace fleetsim {

void write_trace_diff_svg(std::ostream& out, const std::string& title, const TraceDiff& diff) {
  constexpr double kSize = 420, kPad = 60;
  double lo = 1e300, hi = 0;
  for (const TaskError& e : diff.tasks) {
    lo = std::min({lo, e.predicted_s, e.measured_s});
    hi = std::max({hi, e.predicted_s, e.measured_s});
  }
  if (diff.tasks.empty()) lo = 1e-3, hi = 1;
  // Whole decades around the points.
  const double d_lo = std::floor(std::log10(lo)), d_hi = std::max(std::ceil(std::log10(hi)), d_lo + 1);
  auto pos = [&](double v) { return (std::log10(v) - d_lo) / (d_hi - d_lo) * kSize; };
  char buf[256];
  std::snprintf(buf, sizeof buf, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n",
                kSize + 2 * kPad, kSize + 2 * kPad);
  out << buf << "<title>" << title << "</title>\n";
  std::snprintf(buf, sizeof buf, "<g transform=\"translate(%g,%g)\">\n<rect width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n", kPad, kPad, kSize, kSize);
  out << buf;
  for (double d = d_lo; d <= d_hi; ++d) {
    const double p = (d - d_lo) / (d_hi - d_lo) * kSize;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"%g\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">1e%d</text>\n"
                  "<line x1=\"0\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"-6\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                  p, p, kSize, p, kSize + 16, static_cast<int>(d), kSize - p, kSize, kSize - p, kSize - p + 4, static_cast<int>(d));
    out << buf;
  }
  // y = x, and +-10 %.
  for (double f : {1.0, 1.1, 1 / 1.1}) {
    const double shift = std::log10(f) / (d_hi - d_lo) * kSize;
    std::snprintf(buf, sizeof buf, "<line x1=\"0\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"%s\"/>\n", kSize - shift, kSize,
                  -shift, f == 1.0 ? "#444" : "#aaa", f == 1.0 ? "none" : "4 3");
    out << buf;
  }
  for (const TaskError& e : diff.tasks) {
    std::snprintf(buf, sizeof buf, "<circle class=\"task\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#1f77b4\" fill-opacity=\"0.7\"/>\n", pos(e.measured_s),
                  kSize - pos(e.predicted_s));
    out << buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">measured task duration (s)</text>\n"
                "<text transform=\"translate(-44,%g) rotate(-90)\" text-anchor=\"middle\">predicted (s)</text>\n"
                "<text x=\"%g\" y=\"-24\" text-anchor=\"middle\" font-weight=\"bold\">",
                kSize / 2, kSize + 36, kSize / 2, kSize / 2);
  out << buf << title << "</text>\n";
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"-8\" text-anchor=\"middle\">%zu tasks, median error %.1f%%, makespan error %+.1f%%; dashed: +-10%%</text>\n",
                kSize / 2, diff.tasks.size(), 100 * diff.median_abs_error, 100 * diff.makespan_error());
  out << buf << "</g>\n</svg>\n";
}

}  // namespace fleetsim
