// The run directory `fleetsim simulate --out` writes: every table, trace and timeline of one run, its
// report, and how it was made.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "fleetsim/report.hpp"

namespace fleetsim {

void write_output_file(const std::filesystem::path& path, const std::string& what, const std::function<void(std::ostream&)>& write) {
  // Written beside its place and renamed into it once whole: a failed write leaves no half file (and
  // an older file of that name as it was).
  struct Partial {
    std::filesystem::path path;
    bool kept = false;
    ~Partial() {
      std::error_code ignored;
      if (!kept) std::filesystem::remove(path, ignored);
    }
  } partial{path.string() + ".partial-" + std::to_string(::getpid())};
  std::ofstream out(partial.path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + what + " to " + path.string() + ": " + std::strerror(errno));
  write(out);
  out.flush();
  if (!out) throw std::runtime_error("error while writing " + what + " to " + path.string() + ": " + std::strerror(errno));
  out.close();
  std::filesystem::rename(partial.path, path);
  partial.kept = true;
}

std::vector<std::string> write_run_directory(const std::filesystem::path& out_dir, const Scenario& scenario, const RunResult& run,
                                             const std::string& manifest) {
  // All or nothing: the files are written into a directory beside the target and moved in only once
  // every one of them is whole, so a full disk leaves no half run behind.
  std::filesystem::path target = out_dir.lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  const std::filesystem::path parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(parent);
  const std::filesystem::path dir = parent / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  struct File {
    const char* name;
    const char* what;
    std::function<void(std::ostream&)> write;
  };
  const std::vector<File> files{
      {"summary.json", "the summary", [&](std::ostream& o) { o << summary_json(run.summary); }},
      {"trace.csv", "the trace", [&](std::ostream& o) { write_trace_csv(o, scenario, run); }},
      {"trace.json", "the trace", [&](std::ostream& o) { write_trace_json(o, scenario, run); }},
      {"decisions.csv", "the decisions", [&](std::ostream& o) { write_decisions_csv(o, scenario, run); }},
      {"links.csv", "the link totals", [&](std::ostream& o) { write_links_csv(o, run); }},
      {"link_timeline.csv", "the link timeline", [&](std::ostream& o) { write_link_timeline_csv(o, run); }},
      {"vram_timeline.csv", "the VRAM timeline", [&](std::ostream& o) { write_vram_timeline_csv(o, run); }},
      {"cost_timeline.csv", "the cost timeline", [&](std::ostream& o) { write_cost_timeline_csv(o, run); }},
      {"trace.perfetto.json", "the Perfetto trace", [&](std::ostream& o) { write_perfetto_json(o, scenario, run); }},
      {"report.html", "the report", [&](std::ostream& o) { write_run_report_html(o, scenario, run); }},
      {"run.json", "how the run was made", [&](std::ostream& o) { o << manifest; }}};
  // The writers only read the run: the files are written side by side, one per hardware thread. Each
  // file's bytes do not depend on which thread wrote it.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(files.size());
  const auto work = [&] {
    for (std::size_t f; (f = next++) < files.size();) {
      try {
        write_output_file(dir / files[f].name, files[f].what, files[f].write);
      } catch (...) {
        errors[f] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers(std::clamp(std::thread::hardware_concurrency(), 1u, 4u) - 1);
    for (std::jthread& h : helpers) h = std::jthread(work);
    work();
  }
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      throw std::runtime_error("nothing was written to " + target.string() + ": " + x.what());
    }
  }
  // A new directory takes the place whole; into an existing one each file is moved over its old self.
  std::vector<std::string> written;
  for (const File& f : files) written.emplace_back(f.name);
  if (!std::filesystem::exists(target)) {
    std::filesystem::rename(dir, target);
  } else {
    for (const std::string& name : written) std::filesystem::rename(dir / name, target / name);
  }
  return written;
}

}  // namespace fleetsim
