// A cluster job log in CSV (Helios, Acme, Alibaba's PAI and GPU traces, a per-job Philly CSV, any
// other): a mapping names the columns; each job that ran becomes a row of fleetsim's job-trace CSV.
#include <cmath>
#include <map>
#include <unordered_map>

#include "../json_reader.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "job_log.hpp"

namespace fleetsim {
namespace {

// Seconds, or a date and time as seconds since 1970.
std::optional<double> time_in(std::string_view cell) {
  if (const auto x = parse_number(cell)) return x;
  return detail::log_time(cell);
}

// One job as its rows add up: a log of tasks has several rows per job.
struct JobRows {
  double submit_s = INFINITY, start_s = INFINITY, end_s = -INFINITY, duration_s = 0, gpus = 0;
  bool ran = true;  // every row has a run time
  std::string tenant, status;
};

}  // namespace

JobCsvColumns parse_job_csv_columns(std::string_view mapping, JobCsvColumns c) {
  std::vector<Problem> problems;
  const auto bad = [&](const std::string& message) { problems.push_back(Problem{"--columns", "", message}); };
  bool gave_duration = false, gave_span = false;
  for (std::size_t b = 0; !mapping.empty() && b <= mapping.size();) {
    const std::size_t e = std::min(mapping.find(',', b), mapping.size());
    const std::string_view item = mapping.substr(b, e - b);
    b = e + 1;
    const std::size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    std::string column(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    std::string* slot = key == "submit" ? &c.submit : key == "gpus" ? &c.gpus : key == "duration" ? &c.duration : key == "start" ? &c.start
                      : key == "end"    ? &c.end : key == "tenant" ? &c.tenant : key == "status" ? &c.status : key == "share" ? &c.share
                      : key == "job"    ? &c.job : nullptr;
    if (slot == nullptr || column.empty()) {
      bad("expected KEY=COLUMN with KEY one of submit, gpus, duration, start, end, tenant, status, share, job, found \"" + std::string(item) + "\"");
      continue;
    }
    if (slot == &c.share) {
      // share=COLUMN/UNIT: the column counts shares of a GPU in that unit (gpu_milli/1000).
      c.share_unit = 1;
      if (const std::size_t slash = column.rfind('/'); slash != std::string::npos) {
        const std::optional<double> unit = parse_number(std::string_view(column).substr(slash + 1));
        if (!unit || *unit <= 0) {
          bad("expected share=COLUMN or share=COLUMN/UNIT with a positive unit (gpu_milli/1000), found \"" + std::string(item) + "\"");
          continue;
        }
        c.share_unit = *unit;
        column.resize(slash);
      }
    }
    if (slot == &c.duration) c.start.clear(), c.end.clear(), gave_duration = true;
    if (slot == &c.start || slot == &c.end) c.duration.clear(), gave_span = true;
    *slot = column;
  }
  if (gave_duration && gave_span) bad("expected the run time as duration=COLUMN, or as start=COLUMN and end=COLUMN (not both)");
  if (c.submit.empty() || c.gpus.empty()) bad("expected at least submit=COLUMN and gpus=COLUMN");
  if (!(gave_duration && gave_span) && c.duration.empty() && (c.start.empty() || c.end.empty())) bad("expected the run time as duration=COLUMN, or as start=COLUMN and end=COLUMN");
  if (!problems.empty()) throw InputError(std::move(problems));
  return c;
}

// Sources: the logs' own documentation (README and header files of each repository named).
const std::vector<JobLogFormat>& job_log_formats() {
  static const std::vector<JobLogFormat> formats{
      {"helios", "Shanghai AI Lab's Helios traces: cluster_log.csv of each cluster (github.com/S-Lab-System-Group/HeliosData)",
       "submit=submit_time,gpus=gpu_num,duration=duration,tenant=vc,status=state", {}, ""},
      {"acme", "Shanghai AI Lab's Acme traces of LLM clusters: trace_seren.csv, trace_kalos.csv (github.com/InternLM/AcmeTrace)",
       "submit=submit_time,gpus=gpu_num,duration=duration,status=state", {}, ""},
      {"philly-csv", "Microsoft Philly's jobs as one CSV row each (timestamp, duration, num_gpus, gpu_time, cluster), as the Pollux "
                     "simulator ships it (github.com/petuum/adaptdl, simulator/traces/philly.csv)",
       "submit=timestamp,gpus=num_gpus,duration=duration,tenant=cluster", {}, "duration is the sum of the job's attempts' run times"},
      {"alibaba-gpu2023", "Alibaba's 2023 GPU cluster trace: openb_pod_list_*.csv (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023)",
       "submit=creation_time,gpus=num_gpu,share=gpu_milli/1000,start=scheduled_time,end=deletion_time,status=pod_phase", {},
       "a pod still running when the trace was cut (pod_phase Running) is replayed until the trace's end (its deletion_time)"},
      {"pai2020", "Alibaba's PAI 2020 trace: pai_task_table.csv, shipped without a header (github.com/alibaba/clusterdata, cluster-trace-gpu-v2020)",
       "job=job_name,submit=start_time,gpus=inst_num,share=plan_gpu/100,start=start_time,end=end_time,status=status",
       {"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"},
       "a job's tasks are one job: their GPUs (inst_num x plan_gpu / 100) add up, it runs from its first task's start to its last "
       "task's end, and it counts as submitted when its first task started (the task table has no submission time; "
       "pai_job_table's start_time is it, so the real queueing before the first task is not in the replay)"},
  };
  return formats;
}

const JobLogFormat* find_job_log_format(std::string_view name) {
  for (const JobLogFormat& f : job_log_formats()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

JobCsvColumns JobLogFormat::mapping() const {
  JobCsvColumns base;
  base.header = header;
  base.assumed = assumed;
  return parse_job_csv_columns(columns, std::move(base));
}

TraceImport import_job_csv(std::string_view text, const std::string& file_name, const JobCsvColumns& columns, const TraceFilter& filter) {
  detail::Problems problems(file_name);
  std::vector<std::string> header = columns.header;
  const bool header_given = !header.empty();
  bool header_read = header_given;
  std::vector<JobRows> jobs;
  std::unordered_map<std::string, std::size_t> job_of;  // a job's rows, by its job column
  std::map<std::string, std::size_t> dropped;
  std::size_t rows = 0, line_no = 0;
  int c_submit = -1, c_gpus = -1, c_duration = -1, c_start = -1, c_end = -1, c_tenant = -1, c_status = -1, c_share = -1, c_job = -1;
  const auto find_columns = [&](const std::string& at) {
    if (const auto twice = detail::repeated_column(header)) {
      problems.add(at, "the column \"" + *twice + "\" is named twice in the header: name each column once");
      problems.throw_if_any();
    }
    const auto column = [&](const std::string& name) -> int {
      if (name.empty()) return -1;
      const auto it = std::find(header.begin(), header.end(), name);
      if (it != header.end()) return static_cast<int>(it - header.begin());
      std::string names;
      for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
      problems.add(at, "expected a column \"" + name + "\" (as the column mapping names it); the header has " + names);
      return -1;
    };
    c_submit = column(columns.submit), c_gpus = column(columns.gpus), c_duration = column(columns.duration);
    c_start = column(columns.start), c_end = column(columns.end), c_tenant = column(columns.tenant);
    c_status = column(columns.status), c_share = column(columns.share), c_job = column(columns.job);
    problems.throw_if_any();
  };
  if (header_given) find_columns("");

  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \r") == std::string_view::npos || line[0] == '#') continue;
    std::vector<std::string> cells = detail::csv_cells(line);
    const std::string at = "line " + std::to_string(line_no);
    if (!header_read) {
      header = std::move(cells);
      header_read = true;
      find_columns(at);
      continue;
    }
    ++rows;
    if (cells.size() != header.size()) {
      problems.add_repeated("rows with the wrong number of cells", at,
                            "expected " + std::to_string(header.size()) + " cells, found " + std::to_string(cells.size()));
      continue;
    }
    const auto cell = [&](int c) -> const std::string& { return cells[static_cast<std::size_t>(c)]; };
    const auto number_in = [&](int c, const std::string& name, double most, const char* kind) -> std::optional<double> {
      const std::optional<double> x = parse_number(cell(c));
      if (!x || *x < 0 || *x > most) {
        problems.add_repeated(name + " cells that are not " + kind, at + ", " + name,
                              "expected " + std::string(kind) + (std::isinf(most) ? ", 0 or more" : " from 0 to " + detail::shortest_text(most)) +
                                  ", found \"" + cell(c) + "\"");
        return std::nullopt;
      }
      return x;
    };
    const auto time_at = [&](int c, const std::string& name) -> std::optional<double> {
      const std::optional<double> t = time_in(cell(c));
      if (!t) {
        problems.add_repeated(name + " cells that are not times", at + ", " + name,
                              "expected seconds or a time such as \"2020-07-01 08:00:00\", found \"" + cell(c) + "\"");
      }
      return t;
    };
    const std::optional<double> submit = time_at(c_submit, columns.submit);
    if (!submit) continue;
    const std::optional<double> count = number_in(c_gpus, columns.gpus, 65536, "a count of GPUs");
    if (!count) continue;
    std::optional<double> share = 1;
    if (c_share >= 0 && cell(c_share).empty()) {
      share = 0;  // a task that asked for no GPU (PAI's parameter servers)
    } else if (c_share >= 0) {
      share = number_in(c_share, columns.share, 1000 * columns.share_unit, "a share of a GPU");
      if (!share) continue;
      *share /= columns.share_unit;
    }
    // The run time: empty where the job never ran or had not ended when the log was cut.
    std::optional<double> start_s, end_s, duration_s;
    if (c_duration >= 0) {
      if (!cell(c_duration).empty()) {
        duration_s = number_in(c_duration, columns.duration, kLongestSeconds, "seconds");
        if (!duration_s) continue;
      }
    } else if (!cell(c_start).empty() && !cell(c_end).empty()) {
      start_s = time_at(c_start, columns.start);
      end_s = time_at(c_end, columns.end);
      if (!start_s || !end_s) continue;
    }
    std::size_t index = jobs.size();
    if (c_job >= 0) index = job_of.try_emplace(cell(c_job), jobs.size()).first->second;
    if (index == jobs.size()) jobs.push_back({});
    JobRows& job = jobs[index];
    job.submit_s = std::min(job.submit_s, *submit);
    job.gpus += *count * *share;
    if (duration_s) {
      job.duration_s = std::max(job.duration_s, *duration_s);
    } else if (start_s) {
      job.start_s = std::min(job.start_s, *start_s);
      job.end_s = std::max(job.end_s, *end_s);
    } else {
      job.ran = false;
    }
    if (c_tenant >= 0) job.tenant = cell(c_tenant).empty() ? "unknown" : cell(c_tenant);
    if (c_status >= 0) job.status = cell(c_status).empty() ? "unknown" : cell(c_status);
  }
  if (!header_read) problems.add("", "expected a header row naming the columns, found no lines");
  problems.throw_if_any();

  std::vector<detail::LoggedJob> kept;
  std::size_t rounded = 0;
  double asked_gpu_s = 0, rounded_gpu_s = 0;
  for (const JobRows& job : jobs) {
    const double run_s = c_duration >= 0 ? job.duration_s : job.end_s - job.start_s;
    // A share such as 0.3 x 10 adds up to 3.0000000000000004: round asks within a millionth.
    const double gpus = std::ceil(job.gpus - 1e-6);
    if (gpus < 1) {
      ++dropped["no GPUs"];
    } else if (gpus > 65536) {
      ++dropped["more than 65,536 GPUs in all"];
    } else if (!job.ran) {
      ++dropped["no run time (never ran, or still running when the log was cut)"];
    } else if (!(run_s > 0) || !std::isfinite(run_s)) {
      ++dropped["a run time of 0 or less (or past any number)"];
    } else {
      if (gpus > job.gpus + 1e-6) {
        ++rounded;
        asked_gpu_s += job.gpus * run_s;
        rounded_gpu_s += gpus * run_s;
      }
      kept.push_back({job.submit_s, job.tenant, static_cast<std::size_t>(gpus), run_s, job.status});
    }
  }
  TraceImport out = detail::write_job_trace(std::move(kept), filter, c_tenant >= 0, jobs.size(), {dropped.begin(), dropped.end()});
  if (c_job >= 0) out.notes.insert(out.notes.begin() + 1, "the log's " + std::to_string(rows) + " rows are the tasks of " + std::to_string(jobs.size()) + " jobs");
  if (rounded > 0) {
    out.notes.push_back(std::to_string(rounded) + " jobs asked for a fraction of a GPU (shared GPUs); each is replayed on whole GPUs, rounded up, "
                        "which asks " + format_number(rounded_gpu_s / 3600) + " GPU-hours where they asked " +
                        format_number(asked_gpu_s / 3600));
  }
  if (!columns.assumed.empty()) out.notes.push_back("assumed: " + columns.assumed);
  return out;
}

}  // namespace fleetsim
