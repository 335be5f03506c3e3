#include "job_log.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace fleetsim::detail {
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

std::string counted(const std::map<std::string, std::size_t>& counts) {
  std::string text;
  for (const auto& [name, n] : counts) text += (text.empty() ? "" : ", ") + name + " " + std::to_string(n);
  return text;
}

}  // namespace

std::string shortest_text(double x) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, x).ptr);
}

std::optional<double> log_time(std::string_view s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':') return std::nullopt;
  for (auto [from, len, into] : {std::tuple{0, 4, &y}, {5, 2, &mo}, {8, 2, &d}, {11, 2, &h}, {14, 2, &mi}, {17, 2, &se}}) {
    const char* first = s.data() + from;
    if (std::from_chars(first, first + len, *into).ptr != first + len) return std::nullopt;
  }
  const bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  const int month_days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > month_days[mo - 1] || h > 23 || mi > 59 || se > 60) return std::nullopt;
  double t = static_cast<double>(days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) * 86400.0 + h * 3600.0 + mi * 60.0 + se;
  std::string_view rest = s.substr(19);
  if (!rest.empty() && rest[0] == '.') {  // fractions of a second
    std::size_t digits = 1;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 1) return std::nullopt;
    t += *parse_number(std::string("0") + std::string(rest.substr(0, digits)));
    rest.remove_prefix(digits);
  }
  if (rest.empty() || rest == "Z") return t;
  // A UTC offset: +HH:MM or +HHMM (or -).
  int oh = 0, om = 0;
  const bool colon = rest.size() == 6 && rest[3] == ':';
  if ((rest[0] != '+' && rest[0] != '-') || !(colon || rest.size() == 5)) return std::nullopt;
  const char* p = rest.data() + 1;
  if (std::from_chars(p, p + 2, oh).ptr != p + 2) return std::nullopt;
  p += colon ? 3 : 2;
  if (std::from_chars(p, p + 2, om).ptr != p + 2 || oh > 23 || om > 59) return std::nullopt;
  return t - (rest[0] == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
}

std::vector<std::string> csv_cells(std::string_view line) {
  std::vector<std::string> cells(1);
  bool quoted = false, was_quoted = false;
  auto finish = [&] {
    std::string& cell = cells.back();
    if (!was_quoted) {
      while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\r')) cell.pop_back();
      cell.erase(0, std::min(cell.size(), cell.find_first_not_of(' ')));
    }
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"' && cells.back().find_first_not_of(' ') == std::string::npos) {
      cells.back().clear();
      quoted = was_quoted = true;
    } else if (c == ',') {
      finish();
      cells.emplace_back();
      was_quoted = false;
    } else if (!(was_quoted && (c == ' ' || c == '\r'))) {
      cells.back() += c;
    }
  }
  finish();
  return cells;
}

std::optional<std::string> repeated_column(const std::vector<std::string>& header) {
  std::set<std::string_view> seen;
  for (const std::string& name : header) {
    if (!seen.insert(name).second) return name;
  }
  return std::nullopt;
}

namespace {

// The most GPUs a row of the job trace may ask for (the scenario loader's limit).
constexpr std::size_t kMaxTraceGpus = 65'536;

// A cell as the trace's reader reads it back: quoted where it holds a comma, a quote or edge spaces;
// line breaks, which no CSV line can hold, become spaces.
std::string csv_cell(std::string text) {
  std::replace_if(text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  if (text.find_first_of(",\"") == std::string::npos && (text.empty() || (text.front() != ' ' && text.back() != ' '))) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

TraceImport write_job_trace(std::vector<LoggedJob> jobs, const TraceFilter& filter, bool with_tenant, std::size_t logged,
                            const std::vector<std::pair<std::string, std::size_t>>& dropped) {
  std::stable_sort(jobs.begin(), jobs.end(), [](const LoggedJob& a, const LoggedJob& b) { return a.submit_s < b.submit_s; });
  const double log_start_s = jobs.empty() ? 0 : jobs.front().submit_s;
  std::map<std::string, std::size_t> filtered;
  std::erase_if(jobs, [&](const LoggedJob& j) {
    const double t = j.submit_s - log_start_s;
    const char* why = j.gpus > kMaxTraceGpus           ? "more than 65,536 GPUs (the most a trace row may ask for)"
                      : t < filter.from_s              ? "submitted before the window"
                      : t >= filter.to_s               ? "submitted after the window"
                      : j.gpus < filter.min_gpus       ? "fewer GPUs than the minimum"
                      : !filter.tenants.empty() && std::find(filter.tenants.begin(), filter.tenants.end(), j.tenant) == filter.tenants.end()
                          ? "of other tenants"
                          : nullptr;
    if (why != nullptr) ++filtered[why];
    return why != nullptr;
  });

  TraceImport out;
  out.csv = with_tenant ? "submit_time,tenant,gpus,duration\n" : "submit_time,gpus,duration\n";
  const double first_s = jobs.empty() ? 0 : jobs.front().submit_s;
  std::map<std::string, std::size_t> tenants, statuses;
  for (const LoggedJob& j : jobs) {
    out.csv += shortest_text(j.submit_s - first_s) + ',';
    if (with_tenant) {
      out.csv += csv_cell(j.tenant) + ',';
      ++tenants[j.tenant];
    }
    out.csv += std::to_string(j.gpus) + ',' + shortest_text(j.duration_s) + '\n';
    if (!j.status.empty()) ++statuses[j.status];
  }
  out.jobs = jobs.size();
  out.notes.push_back("kept " + std::to_string(jobs.size()) + " of " + std::to_string(logged) + " jobs");
  if (!statuses.empty()) out.notes.push_back("kept by final status: " + counted(statuses) + " (each replayed for the time it ran)");
  for (const auto& [why, n] : dropped) out.notes.push_back("dropped " + std::to_string(n) + ": " + why);
  for (const auto& [why, n] : filtered) out.notes.push_back("filtered out " + std::to_string(n) + ": " + why);
  out.notes.push_back("submit_time counts seconds from the first kept job's submission; the log's times carry no time zone, "
                      "so they are taken as one clock (a daylight-saving change inside the window would shift later rows by an hour)");
  if (!tenants.empty()) {
    std::string names;
    for (const auto& [name, n] : tenants) names += (names.empty() ? "\"" : ", \"") + name + "\"";
    out.notes.push_back("tenants the scenario must list: " + names);
  }
  return out;
}

}  // namespace fleetsim::detail
