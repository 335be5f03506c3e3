// Microsoft Philly's cluster job log (cluster_job_log, JSON; github.com/msr-fiddle/philly-traces): an
// array of jobs, each with its virtual cluster (vc), user, status, submitted_time, and attempts whose
// start_time, end_time and detail (machines, each with the GPUs it gave the attempt). A job becomes
// one row of fleetsim's job-trace CSV: when it was submitted, its gang (the GPUs of its last attempt)
// and how long that attempt ran.
#include <map>

#include "../json_reader.hpp"
#include "job_log.hpp"

namespace fleetsim {
namespace {

using detail::LoggedJob;

// The time in a log field; nothing for null, "None" or a malformed time.
std::optional<double> log_time(const detail::Json& v) { return v.is_string() ? detail::log_time(v.get<std::string>()) : std::nullopt; }

// A job's text field, or `fallback` where it is missing or not text.
std::string text_of(const detail::Json& job, const char* key, const char* fallback) {
  const auto it = job.find(key);
  return it != job.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

TraceImport import_philly_trace(std::string_view json_text, const std::string& file_name, PhillyTenant tenant, const TraceFilter& filter) {
  using detail::Json;
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  if (!doc.is_array()) {
    problems.add("", "expected Philly's cluster job log: an array of jobs, found " + detail::describe(doc));
    problems.throw_if_any();
  }
  std::vector<LoggedJob> rows;
  std::map<std::string, std::size_t> dropped;
  const char* tenant_key = tenant == PhillyTenant::vc ? "vc" : "user";
  const Json none, no_attempts = Json::array();
  for (std::size_t j = 0; j < doc.size(); ++j) {
    const Json& job = doc[j];
    const std::string at = "/" + std::to_string(j);
    if (!job.is_object()) {
      problems.add_repeated("jobs that are not objects", at, "expected a job object, found " + detail::describe(job));
      continue;
    }
    const Json& submitted_time = job.contains("submitted_time") ? job["submitted_time"] : none;
    const std::optional<double> submitted = log_time(submitted_time);
    if (!submitted) {
      problems.add_repeated("jobs without a submitted_time", at + "/submitted_time",
                            "expected a time such as \"2017-10-03 14:05:59\", found " + detail::describe(submitted_time));
      continue;
    }
    // The last attempt that ran to an end: its GPUs and its run time stand for the job.
    const Json& attempts = job.contains("attempts") && job["attempts"].is_array() ? job["attempts"] : no_attempts;
    const Json* last = nullptr;
    for (const Json& a : attempts) {
      if (a.is_object() && a.contains("start_time") && a.contains("end_time") && log_time(a["start_time"]) && log_time(a["end_time"])) last = &a;
    }
    if (last == nullptr) {
      ++dropped["no attempt with a start and an end time (never ran, or still running when the log was cut)"];
      continue;
    }
    std::size_t gpus = 0;
    if (last->contains("detail") && (*last)["detail"].is_array()) {
      for (const Json& machine : (*last)["detail"]) {
        if (machine.is_object() && machine.contains("gpus") && machine["gpus"].is_array()) gpus += machine["gpus"].size();
      }
    }
    const double duration_s = *log_time((*last)["end_time"]) - *log_time((*last)["start_time"]);
    if (gpus == 0) {
      ++dropped["no GPUs in its last attempt"];
      continue;
    }
    if (duration_s <= 0) {
      ++dropped["a last attempt that ended when it started (or before)"];
      continue;
    }
    rows.push_back({*submitted, tenant == PhillyTenant::none ? "" : text_of(job, tenant_key, "unknown"), gpus, duration_s,
                    text_of(job, "status", "unknown")});
  }
  problems.throw_if_any();

  return detail::write_job_trace(std::move(rows), filter, tenant != PhillyTenant::none, doc.size(), {dropped.begin(), dropped.end()});
}

}  // namespace fleetsim
