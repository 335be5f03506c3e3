// What every cluster job log importer shares: one job as it was logged, the log's clock times, the
// cells of a CSV line, and writing the kept jobs as fleetsim's job-trace CSV after the filter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/import.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim::detail {

struct LoggedJob {
  double submit_s;     // on the log's clock
  std::string tenant;  // "" without a tenant column
  std::size_t gpus;
  double duration_s;
  std::string status;  // "" where the log has none
};

// Shortest text that reads back as the same number ("3600", "82.2").
std::string shortest_text(double x);

// "2017-10-03 14:05:59" (or with a "T"), optionally with fractions of a second and a UTC offset ("Z",
// "+08:00", "+0800"), as seconds since 1970 (UTC where an offset is given, else on the log's clock);
// nothing for anything else.
std::optional<double> log_time(std::string_view text);

// The cells of one CSV line: separated by commas, spaces around them trimmed, "double quotes" around a
// cell removed (a quoted cell may hold commas; "" inside is one quote).
std::vector<std::string> csv_cells(std::string_view line);

// The first column name a CSV header gives twice (which of the two a reader took would be a guess).
std::optional<std::string> repeated_column(const std::vector<std::string>& header);

// The jobs, in submission order, that pass the filter (its window counted from the first job's
// submission), as the job-trace CSV (times from the first kept job), with notes on what was kept and
// dropped (`dropped`: jobs the importer dropped already, by reason; `logged`: the jobs the log has).
TraceImport write_job_trace(std::vector<LoggedJob> jobs, const TraceFilter& filter, bool with_tenant, std::size_t logged,
                            const std::vector<std::pair<std::string, std::size_t>>& dropped);

}  // namespace fleetsim::detail
