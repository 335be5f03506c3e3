// The run directory `fleetsim simulate --out` writes: every table, trace and timeline of one run, its
// report, and how it was made.
#include "fleetsim/report.hpp"

namespace fleetsim {
namespace {

struct RunFile {
  const char* name;
  const char* what;
  void (*write)(std::ostream&, const Scenario&, const RunResult&, const std::string& manifest);
};

// The files, in the order they are listed.
constexpr RunFile kRunFiles[] = {
    {"summary.json", "the summary", [](std::ostream& o, const Scenario&, const RunResult& r, const std::string&) { o << summary_json(r.summary); }},
    {"trace.csv", "the trace", [](std::ostream& o, const Scenario& s, const RunResult& r, const std::string&) { write_trace_csv(o, s, r); }},
    {"trace.json", "the trace", [](std::ostream& o, const Scenario& s, const RunResult& r, const std::string&) { write_trace_json(o, s, r); }},
    {"decisions.csv", "the decisions", [](std::ostream& o, const Scenario& s, const RunResult& r, const std::string&) { write_decisions_csv(o, s, r); }},
    {"links.csv", "the link totals", [](std::ostream& o, const Scenario&, const RunResult& r, const std::string&) { write_links_csv(o, r); }},
    {"link_timeline.csv", "the link timeline", [](std::ostream& o, const Scenario&, const RunResult& r, const std::string&) { write_link_timeline_csv(o, r); }},
    {"vram_timeline.csv", "the VRAM timeline", [](std::ostream& o, const Scenario&, const RunResult& r, const std::string&) { write_vram_timeline_csv(o, r); }},
    {"cost_timeline.csv", "the cost timeline", [](std::ostream& o, const Scenario&, const RunResult& r, const std::string&) { write_cost_timeline_csv(o, r); }},
    {"trace.perfetto.json", "the Perfetto trace", [](std::ostream& o, const Scenario& s, const RunResult& r, const std::string&) { write_perfetto_json(o, s, r); }},
    {"report.html", "the report", [](std::ostream& o, const Scenario& s, const RunResult& r, const std::string&) { write_run_report_html(o, s, r); }},
    {"run.json", "how the run was made", [](std::ostream& o, const Scenario&, const RunResult&, const std::string& m) { o << m; }},
};

}  // namespace

std::vector<std::string> run_directory_names() {
  std::vector<std::string> names;
  for (const RunFile& f : kRunFiles) names.emplace_back(f.name);
  return names;
}

std::vector<std::string> write_run_directory(const std::filesystem::path& out_dir, const Scenario& scenario, const RunResult& run,
                                             const std::string& manifest) {
  std::vector<OutputFile> files;
  for (const RunFile& f : kRunFiles) files.push_back({f.name, f.what, [&, write = f.write](std::ostream& o) { write(o, scenario, run, manifest); }});
  return write_output_directory(out_dir, files);
}

}  // namespace fleetsim
