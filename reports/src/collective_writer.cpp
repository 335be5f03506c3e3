#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"

namespace fleetsim {
namespace {

bool rooted(CollectiveOp op) { return op == CollectiveOp::broadcast || op == CollectiveOp::reduce; }
bool reducing(CollectiveOp op) {
  return op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter || op == CollectiveOp::reduce;
}

void write_header(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                  const std::vector<std::string>& notes, bool measured) {
  out << "# fleetsim collective: " << collective_op_name(op) << " over " << ranks << " GPUs of " << where << "\n";
  for (const std::string& n : notes) out << "# " << n << "\n";
  out << "# time: the flow model of the chosen algorithm and protocol as runs achieve them; nccl: NCCL's own estimate, which it chose by\n";
  if (measured) out << "# error: (predicted - measured) / measured\n";
  out << "#\n";
}

// The columns every row shares, as nccl-tests prints them, then fleetsim's choice.
std::string row_start(CollectiveOp op, const CollectivePoint& p) {
  char line[160];
  const std::string proto = p.proto == CollectiveProto::automatic ? "-" : std::string(collective_proto_name(p.proto));
  const std::string channels = p.channels > 0 ? std::to_string(p.channels) : "-";
  std::snprintf(line, sizeof line, "  %12.0f %12.0f %6s %6s %5d %9s %6s %3s", p.bytes, std::floor(p.bytes / 4), "float",
                reducing(op) ? "sum" : "none", rooted(op) ? 0 : -1, std::string(collective_algo_name(p.algo)).c_str(),
                proto.c_str(), channels.c_str());
  return line;
}

double nccl_us(const CollectivePoint& p) { return p.nccl_s > 0 ? p.nccl_s * 1e6 : std::nan(""); }

}  // namespace

void write_collective_table(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                            const std::vector<CollectivePoint>& points, const std::vector<std::string>& notes) {
  write_header(out, op, ranks, where, notes, false);
  char line[240];
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %9s %6s %3s %10s %10s %8s %8s\n", "size", "count", "type", "redop",
                "root", "algo", "proto", "ch", "time", "nccl", "algbw", "busbw");
  out << line;
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %9s %6s %3s %10s %10s %8s %8s\n", "(B)", "(elements)", "", "", "", "", "",
                "", "(us)", "(us)", "(GB/s)", "(GB/s)");
  out << line;
  for (const CollectivePoint& p : points) {
    std::snprintf(line, sizeof line, " %10.2f %10.2f %8.2f %8.2f\n", p.time_s * 1e6, nccl_us(p), p.algbw_Bps / 1e9, p.busbw_Bps / 1e9);
    out << row_start(op, p) << line;
  }
}

CollectiveErrors collective_errors(const std::vector<CollectivePoint>& points, const MeasuredCollective& measured) {
  CollectiveErrors e;
  std::vector<double> abs;
  for (std::size_t i = 0; i < points.size() && i < measured.rows.size(); ++i) {
    const double err = (points[i].time_s - measured.rows[i].second) / measured.rows[i].second;
    abs.push_back(std::abs(err));
    if (std::abs(err) > std::abs(e.worst)) {
      e.worst = err;
      e.worst_bytes = points[i].bytes;
    }
  }
  if (abs.empty()) return e;
  std::sort(abs.begin(), abs.end());
  const std::size_t n = abs.size();
  e.median_abs = n % 2 == 1 ? abs[n / 2] : (abs[n / 2 - 1] + abs[n / 2]) / 2;
  e.sizes = n;
  return e;
}

void write_collective_comparison(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                                 const std::vector<CollectivePoint>& points, const MeasuredCollective& measured,
                                 const std::vector<std::string>& notes) {
  write_header(out, op, ranks, where, notes, true);
  out << "# measured: " << measured.file << "\n#\n";
  char line[240];
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %9s %6s %3s %10s %10s %7s %8s %8s\n", "size", "count", "type", "redop", "root",
                "algo", "proto", "ch", "predicted", "measured", "error", "busbw", "busbw");
  out << line;
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %9s %6s %3s %10s %10s %7s %8s %8s\n", "(B)", "(elements)", "", "", "", "", "",
                "", "(us)", "(us)", "", "predict", "measured");
  out << line;
  const double factor = bus_bandwidth_factor(op, ranks);
  for (std::size_t i = 0; i < points.size() && i < measured.rows.size(); ++i) {
    const CollectivePoint& p = points[i];
    const double m = measured.rows[i].second;
    std::snprintf(line, sizeof line, " %10.2f %10.2f %+6.1f%% %8.2f %8.2f\n", p.time_s * 1e6, m * 1e6, 100 * (p.time_s - m) / m,
                  p.busbw_Bps / 1e9, p.bytes / m * factor / 1e9);
    out << row_start(op, p) << line;
  }
  const CollectiveErrors e = collective_errors(points, measured);
  std::snprintf(line, sizeof line, "# median |error| %.1f%% over %zu sizes; worst %+.1f%% at %.0f B\n", 100 * e.median_abs, e.sizes,
                100 * e.worst, e.worst_bytes);
  out << line;
}

std::string collective_json(CollectiveOp op, std::size_t ranks, const std::string& where, const std::vector<CollectivePoint>& points,
                            const std::vector<std::string>& notes, const MeasuredCollective* measured) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < points.size(); ++i) {
    const CollectivePoint& p = points[i];
    nlohmann::ordered_json row{{"size_bytes", p.bytes},
                               {"algo", collective_algo_name(p.algo)},
                               {"proto", p.proto == CollectiveProto::automatic ? nlohmann::ordered_json(nullptr)
                                                                               : nlohmann::ordered_json(collective_proto_name(p.proto))},
                               {"channels", p.channels},
                               {"time_s", p.time_s},
                               {"analytical_s", p.analytical_s},
                               {"nccl_s", p.nccl_s},
                               {"algbw_Bps", p.algbw_Bps},
                               {"busbw_Bps", p.busbw_Bps}};
    if (measured != nullptr && i < measured->rows.size()) {
      row["measured_s"] = measured->rows[i].second;
      row["error"] = (p.time_s - measured->rows[i].second) / measured->rows[i].second;
    }
    rows.push_back(row);
  }
  nlohmann::ordered_json doc{{"op", collective_op_name(op)}, {"ranks", ranks}, {"cluster", where}, {"notes", notes}, {"points", rows}};
  if (measured != nullptr) {
    const CollectiveErrors e = collective_errors(points, *measured);
    doc["measured"] = {{"file", measured->file}, {"sizes", e.sizes}, {"median_abs_error", e.median_abs},
                       {"worst_error", e.worst}, {"worst_size_bytes", e.worst_bytes}};
  }
  return doc.dump(2) + "\n";
}

}  // namespace fleetsim
