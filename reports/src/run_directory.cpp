// The run directory `fleetsim simulate --out` writes: every table, trace and timeline of one run, its
// report, and how it was made.
#include <fstream>

#include "fleetsim/report.hpp"

namespace fleetsim {

void write_output_file(const std::filesystem::path& path, const std::string& what, const std::function<void(std::ostream&)>& write) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + what + " to " + path.string());
  write(out);
  if (!out) throw std::runtime_error("error while writing " + path.string());
}

std::vector<std::string> write_run_directory(const std::filesystem::path& dir, const Scenario& scenario, const RunResult& run,
                                             const std::string& manifest) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  const auto file = [&](const char* name, const std::string& what, const std::function<void(std::ostream&)>& write) {
    write_output_file(dir / name, what, write);
    written.push_back(name);
  };
  file("summary.json", "the summary", [&](std::ostream& o) { o << summary_json(run.summary); });
  file("trace.csv", "the trace", [&](std::ostream& o) { write_trace_csv(o, scenario, run); });
  file("trace.json", "the trace", [&](std::ostream& o) { write_trace_json(o, scenario, run); });
  file("decisions.csv", "the decisions", [&](std::ostream& o) { write_decisions_csv(o, scenario, run); });
  file("links.csv", "the link totals", [&](std::ostream& o) { write_links_csv(o, run); });
  file("link_timeline.csv", "the link timeline", [&](std::ostream& o) { write_link_timeline_csv(o, run); });
  file("vram_timeline.csv", "the VRAM timeline", [&](std::ostream& o) { write_vram_timeline_csv(o, run); });
  file("cost_timeline.csv", "the cost timeline", [&](std::ostream& o) { write_cost_timeline_csv(o, run); });
  file("trace.perfetto.json", "the Perfetto trace", [&](std::ostream& o) { write_perfetto_json(o, scenario, run); });
  file("report.html", "the report", [&](std::ostream& o) { write_run_report_html(o, scenario, run); });
  file("run.json", "how the run was made", [&](std::ostream& o) { o << manifest; });
  return written;
}

}  // namespace fleetsim
