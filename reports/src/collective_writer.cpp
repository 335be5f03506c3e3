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

}  // namespace

void write_collective_table(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                            const std::vector<CollectivePoint>& points) {
  out << "# fleetsim collective: " << collective_op_name(op) << " over " << ranks << " GPUs of " << where << "\n"
      << "# predicted by the flow model (max-min sharing); alpha-beta is the analytical estimate\n#\n";
  char line[200];
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %7s %11s %11s %8s %8s\n", "size", "count", "type", "redop",
                "root", "algo", "time", "alpha-beta", "algbw", "busbw");
  out << line;
  std::snprintf(line, sizeof line, "# %12s %12s %6s %6s %5s %7s %11s %11s %8s %8s\n", "(B)", "(elements)", "", "", "",
                "", "(us)", "(us)", "(GB/s)", "(GB/s)");
  out << line;
  for (const CollectivePoint& p : points) {
    std::snprintf(line, sizeof line, "  %12.0f %12.0f %6s %6s %5d %7s %11.2f %11.2f %8.2f %8.2f\n", p.bytes,
                  std::floor(p.bytes / 4), "float", reducing(op) ? "sum" : "none", rooted(op) ? 0 : -1,
                  std::string(collective_algo_name(p.algo)).c_str(), p.time_s * 1e6, p.analytical_s * 1e6,
                  p.algbw_Bps / 1e9, p.busbw_Bps / 1e9);
    out << line;
  }
}

std::string collective_json(CollectiveOp op, std::size_t ranks, const std::string& where,
                            const std::vector<CollectivePoint>& points) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const CollectivePoint& p : points) {
    rows.push_back({{"size_bytes", p.bytes}, {"algo", collective_algo_name(p.algo)}, {"time_s", p.time_s},
                    {"analytical_s", p.analytical_s}, {"algbw_Bps", p.algbw_Bps}, {"busbw_Bps", p.busbw_Bps}});
  }
  nlohmann::ordered_json doc{{"op", collective_op_name(op)}, {"ranks", ranks}, {"cluster", where}, {"points", rows}};
  return doc.dump(2) + "\n";
}

}  // namespace fleetsim
