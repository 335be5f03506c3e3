// Microsoft Philly's cluster job log (cluster_job_log, JSON; github.com/msr-fiddle/philly-traces): an
// array of jobs, each with its virtual cluster (vc), user, status, submitted_time, and attempts whose
// start_time, end_time and detail (machines, each with the GPUs it gave the attempt). A job becomes
// one row of fleetsim's job-trace CSV: when it was submitted, its gang (the GPUs of its last attempt)
// and how long that attempt ran.
#include <algorithm>
#include <charconv>
#include <map>

#include "../json_reader.hpp"
#include "fleetsim/import.hpp"

namespace fleetsim {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// "2017-10-03 14:05:59" as seconds since 1970 on the log's clock; nothing for null, "None" or a malformed time.
std::optional<double> log_time(const detail::Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') return std::nullopt;
  for (auto [from, len, into] : {std::tuple{0, 4, &y}, {5, 2, &mo}, {8, 2, &d}, {11, 2, &h}, {14, 2, &mi}, {17, 2, &se}}) {
    const char* first = s.data() + from;
    if (std::from_chars(first, first + len, *into).ptr != first + len) return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
  return static_cast<double>(days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) * 86400.0 + h * 3600.0 + mi * 60.0 + se;
}

// A job's text field, or `fallback` where it is missing or not text.
std::string text_of(const detail::Json& job, const char* key, const char* fallback) {
  const auto it = job.find(key);
  return it != job.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

TraceImport import_philly_trace(std::string_view json_text, const std::string& file_name, PhillyTenant tenant) {
  using detail::Json;
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  if (!doc.is_array()) {
    problems.add("", "expected Philly's cluster job log: an array of jobs, found " + detail::describe(doc));
    problems.throw_if_any();
  }
  struct Row {
    double submit_s;
    std::string tenant;
    std::size_t gpus;
    double duration_s;
  };
  std::vector<Row> rows;
  std::map<std::string, std::size_t> dropped, statuses;
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
    rows.push_back({*submitted, tenant == PhillyTenant::none ? "" : text_of(job, tenant_key, "unknown"), gpus, duration_s});
    ++statuses[text_of(job, "status", "unknown")];
  }
  problems.throw_if_any();

  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.submit_s < b.submit_s; });
  TraceImport out;
  out.csv = tenant == PhillyTenant::none ? "submit_time,gpus,duration\n" : "submit_time,tenant,gpus,duration\n";
  const double first_s = rows.empty() ? 0 : rows.front().submit_s;
  std::map<std::string, std::size_t> tenants;
  for (const Row& r : rows) {
    out.csv += std::to_string(static_cast<long long>(r.submit_s - first_s)) + ',';
    if (tenant != PhillyTenant::none) {
      out.csv += r.tenant + ',';
      ++tenants[r.tenant];
    }
    out.csv += std::to_string(r.gpus) + ',' + std::to_string(static_cast<long long>(r.duration_s)) + '\n';
  }
  out.jobs = rows.size();
  out.notes.push_back("kept " + std::to_string(rows.size()) + " of " + std::to_string(doc.size()) + " jobs");
  std::string by_status;
  for (const auto& [status, n] : statuses) by_status += (by_status.empty() ? "" : ", ") + status + " " + std::to_string(n);
  if (!by_status.empty()) out.notes.push_back("kept by final status: " + by_status + " (each replayed for its last attempt's run time)");
  for (const auto& [why, n] : dropped) out.notes.push_back("dropped " + std::to_string(n) + ": " + why);
  out.notes.push_back("submit_time counts seconds from the first kept job's submitted_time; the log's times carry no time zone, "
                      "so they are taken as one clock (a daylight-saving change inside the window would shift later rows by an hour)");
  if (!tenants.empty()) {
    std::string names;
    for (const auto& [name, n] : tenants) names += (names.empty() ? "\"" : ", \"") + name + "\"";
    out.notes.push_back("tenants (" + std::string(tenant == PhillyTenant::vc ? "virtual clusters" : "users") + ") the scenario must list: " + names);
  }
  return out;
}

}  // namespace fleetsim
