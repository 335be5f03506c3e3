#include "fleetsim/nccl_tests.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {
namespace {

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// MPI launchers prefix output with the rank: "[0]" (sometimes several times on one line).
std::string without_rank_prefixes(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '[') {
      std::size_t j = i + 1;
      while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
      if (j > i + 1 && j < line.size() && line[j] == ']') {
        out += ' ';
        i = j;
        continue;
      }
    }
    out += line[i];
  }
  return out;
}

std::optional<CollectiveOp> op_of_test(std::string name) {
  if (name.ends_with("_perf_mpi")) name.resize(name.size() - 4);
  if (!name.ends_with("_perf")) return std::nullopt;
  name.resize(name.size() - 5);
  if (name == "alltoall") return CollectiveOp::all_to_all;
  if (name == "sendrecv") return CollectiveOp::send_recv;
  std::replace(name.begin(), name.end(), '_', '-');
  return parse_collective_op(name);
}

class RowReader {
 public:
  RowReader(const std::vector<std::string>& cells, std::size_t line, const std::string& file, std::vector<Problem>& problems)
      : cells_(cells), line_(line), file_(file), problems_(problems) {}

  double number(std::size_t i, const char* column) {
    const std::string& cell = cells_[i];
    const std::optional<double> parsed = parse_number(cell);
    const double v = parsed.value_or(0);
    const bool negative_allowed = std::string_view(column) == "root";  // -1: no root
    if (!parsed || (v < 0 && !negative_allowed)) {
      fail(column, "expected a number, found \"" + cell + "\"");
      return 0;
    }
    return v;
  }

  // A whole number (element counts, ranks, wrong elements), no larger than 2^53: an integer a double
  // holds exactly, so the conversion is defined (found by fuzzing: 3.8e67 elements).
  std::int64_t whole(std::size_t i, const char* column) {
    const double v = number(i, column);
    if (v != std::floor(v) || std::abs(v) > 9007199254740992.0) {
      fail(column, "expected a whole number up to 2^53, found \"" + cells_[i] + "\"");
      return 0;
    }
    return static_cast<std::int64_t>(v);
  }

  // A size in bytes up to 2^50 (a pebibyte; nccl-tests' largest are gigabytes), or a time in microseconds from
  // a nanosecond to 10,000 s: past those a log is broken, and the fits would take its numbers as measured.
  double bytes(std::size_t i, const char* column) {
    const double v = number(i, column);
    if (v > 1125899906842624.0) fail(column, "expected a size of at most 2^50 bytes, found \"" + cells_[i] + "\"");
    return v;
  }
  double time_us(std::size_t i, const char* column) {
    const double v = number(i, column);
    if (v != 0 && (v < 1e-3 || v > 1e10)) fail(column, "expected a time from 0.001 to 1e10 microseconds, found \"" + cells_[i] + "\"");
    return v;
  }

  void fail(const char* column, std::string message) {
    problems_.push_back(Problem{file_, "line " + std::to_string(line_) + ", column " + column, std::move(message)});
  }

 private:
  const std::vector<std::string>& cells_;
  std::size_t line_;
  const std::string& file_;
  std::vector<Problem>& problems_;
};

}  // namespace

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file) {
  NcclTestsLog log;
  log.file = file;
  std::vector<Problem> problems;
  std::size_t line_no = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string line = without_rank_prefixes(text.substr(begin, end - begin));
    begin = end + 1;
    ++line_no;
    const std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    const bool comment = w[0] == "#";
    const std::vector<std::string> rest(w.begin() + (comment ? 1 : 0), w.end());
    if (rest.empty()) continue;
    // Header lines carry the facts the rows need; both layouts print them with or without '#'.
    if (rest.size() >= 3 && rest[0] == "nccl-tests" && rest[1] == "version") {
      log.version = line.substr(line.find("version") + 8);
      continue;
    }
    if (rest.size() >= 4 && rest[0] == "Collective" && rest[1] == "test" && rest[2] == "starting:") {
      log.op = op_of_test(rest[3]);
      if (!log.op) problems.push_back(Problem{file, "line " + std::to_string(line_no), "unknown test \"" + rest[3] + "\""});
      continue;
    }
    if (rest[0] == "Rank") {
      const auto on = std::find(rest.begin(), rest.end(), "on");
      if (on != rest.end() && on + 1 != rest.end()) {
        if (std::find(log.hosts.begin(), log.hosts.end(), *(on + 1)) == log.hosts.end()) log.hosts.push_back(*(on + 1));
        const std::size_t bracket = line.find(']', line.find(" device "));
        if (log.ranks == 0 && bracket != std::string::npos && line.find_first_not_of(' ', bracket + 1) != std::string::npos) {
          log.device = line.substr(line.find_first_not_of(' ', bracket + 1));
        }
      }
      ++log.ranks;
      continue;
    }
    if (rest.size() >= 4 && rest[0] == "Avg" && rest[1] == "bus" && rest[2] == "bandwidth") {
      if (const std::optional<double> v = parse_number(rest.back()); v && *v >= 0) log.avg_busbw_Bps = *v * 1e9;
      continue;
    }
    if (comment || !std::isdigit(static_cast<unsigned char>(rest[0][0]))) continue;  // banners, column titles, NCCL INFO lines
    // size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
    if (rest.size() != 12 && rest.size() != 13) {
      problems.push_back(Problem{file, "line " + std::to_string(line_no),
                                 "expected a result row of 12 or 13 columns (size count type redop [root] then time algbw busbw #wrong "
                                 "out-of-place and in-place), found " + std::to_string(rest.size())});
      continue;
    }
    const std::size_t before = problems.size();
    RowReader r(rest, line_no, file, problems);
    NcclTestsRow row;
    row.line = line_no;
    row.bytes = r.bytes(0, "size");
    row.count = static_cast<std::uint64_t>(r.whole(1, "count"));
    row.type = rest[2];
    row.redop = rest[3];
    std::size_t c = 4;
    if (rest.size() == 13) row.root = r.whole(c++, "root");
    for (NcclTestsResult* result : {&row.out_of_place, &row.in_place}) {
      const char* place = result == &row.out_of_place ? "(out-of-place)" : "(in-place)";
      result->time_s = r.time_us(c++, "time") * 1e-6;
      result->algbw_Bps = r.number(c++, "algbw") * 1e9;
      result->busbw_Bps = r.number(c++, "busbw") * 1e9;
      const std::string& wrong = rest[c++];
      if (wrong != "N/A") result->wrong = r.whole(c - 1, "#wrong");
      if (result->wrong > 0) r.fail("#wrong", std::to_string(result->wrong) + " wrong elements " + place + ": the run failed validation");
    }
    if (problems.size() == before && !(row.out_of_place.time_s > 0)) r.fail("time", "expected a positive time");
    if (problems.size() == before) log.rows.push_back(std::move(row));
  }
  if (problems.empty() && log.rows.empty()) problems.push_back(Problem{file, "", "expected nccl-tests result rows (size count type redop ...), found none"});
  if (problems.empty() && log.ranks == 0) problems.push_back(Problem{file, "", "expected the \"# Using devices\" rank lines, found none"});
  if (!problems.empty()) throw InputError(std::move(problems));
  return log;
}

NcclTestsResult nccl_tests_result(CollectiveOp op, std::size_t ranks, double bytes, double time_s) {
  const double algbw_Bps = bytes / time_s;
  return {.time_s = time_s, .algbw_Bps = algbw_Bps, .busbw_Bps = algbw_Bps * bus_bandwidth_factor(op, ranks), .wrong = -1};
}

NcclTestsLog load_nccl_tests_log(const std::string& path) { return parse_nccl_tests_log(read_text_file(path), path); }

MeasuredCollective parse_measured_collective(std::string_view text, const std::string& file) {
  MeasuredCollective m;
  m.file = file;
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text.substr(first).starts_with("bytes")) {
    std::vector<Problem> problems;
    std::istringstream in{std::string(text)};
    std::string line;
    std::size_t number = 0;
    bool header = false;
    while (std::getline(in, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      auto at = [&](const char* column) { return "line " + std::to_string(number) + (column[0] ? std::string(", column ") + column : ""); };
      if (!header) {
        header = true;
        if (line != "bytes,time_us") problems.push_back({file, at(""), "expected the header \"bytes,time_us\", found \"" + line + "\""});
        continue;
      }
      const std::size_t comma = line.find(',');
      if (comma == std::string::npos || line.find(',', comma + 1) != std::string::npos) {
        problems.push_back({file, at(""), "expected two numbers separated by a comma, found \"" + line + "\""});
        continue;
      }
      const std::vector<std::string> cells{line.substr(0, comma), line.substr(comma + 1)};
      RowReader r(cells, number, file, problems);
      const std::size_t before = problems.size();
      const double bytes = r.bytes(0, "bytes"), us = r.time_us(1, "time_us");
      if (problems.size() == before && !(bytes > 0)) r.fail("bytes", "expected a positive size");
      if (problems.size() == before && !(us > 0)) r.fail("time_us", "expected a positive time");
      if (problems.size() == before) m.rows.emplace_back(bytes, us * 1e-6);
    }
    if (problems.empty() && m.rows.empty()) problems.push_back({file, "", "expected rows of bytes,time_us, found none"});
    if (!problems.empty()) throw InputError(std::move(problems));
  } else {
    const NcclTestsLog log = parse_nccl_tests_log(text, file);
    m.op = log.op;
    m.ranks = log.ranks;
    for (const NcclTestsRow& r : log.rows) m.rows.emplace_back(r.bytes, r.out_of_place.time_s);
  }
  std::sort(m.rows.begin(), m.rows.end());
  for (std::size_t i = 1; i < m.rows.size(); ++i) {
    if (m.rows[i].first == m.rows[i - 1].first) {
      throw InputError({Problem{file, "", "the size " + std::to_string(static_cast<long long>(m.rows[i].first)) + " B appears twice"}});
    }
  }
  return m;
}

MeasuredCollective load_measured_collective(const std::string& path) { return parse_measured_collective(read_text_file(path), path); }

NcclTestsFit fit_nccl_tests(const NcclTestsLog& log, CollectiveOp op, CollectiveAlgo algo, const std::string& node_type) {
  auto refuse = [&](std::string message) { throw InputError({Problem{log.file, "", std::move(message)}}); };
  if (log.hosts.size() > 1) {
    refuse("the run spans " + std::to_string(log.hosts.size()) + " hosts; only single-node logs can be fitted so far (they calibrate the GPU link)");
  }
  std::vector<NcclTestsRow> rows = log.rows;
  std::sort(rows.begin(), rows.end(), [](const NcclTestsRow& a, const NcclTestsRow& b) { return a.bytes < b.bytes; });
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const NcclTestsRow& r) { return r.bytes <= 0; }), rows.end());
  if (rows.size() < 2 || rows.front().bytes == rows.back().bytes) refuse("expected results at two or more sizes");

  const ClusterSpec spec = cluster_of(node_type, 1);
  if (static_cast<std::size_t>(spec.groups.at(0).node.gpus) < log.ranks) {
    refuse("the run has " + std::to_string(log.ranks) + " ranks but a " + node_type + " node has " +
           std::to_string(spec.groups[0].node.gpus) + " GPUs");
  }
  const Cluster cluster(spec);
  std::vector<GpuId> gpus;
  for (std::size_t i = 0; i < log.ranks; ++i) gpus.push_back(make_id<GpuId>(static_cast<std::uint32_t>(i)));
  const auto comm = nccl_comm(cluster, gpus);
  if (!comm) refuse("a " + node_type + " node's GPU (" + spec.groups[0].gpu.id + ") names no architecture NCCL's model covers");
  const NcclModel model(*comm);
  // The model's latency and transfer time at each size, unscaled.
  auto parts = [&](double bytes) {
    const auto e = model.estimate(op, bytes, algo);
    if (!e) {
      refuse(std::string(collective_algo_name(algo)) + " cannot run " + std::string(collective_op_name(op)) + " on " +
             std::to_string(log.ranks) + " GPUs of a " + node_type + " node");
    }
    return std::pair{e->latency_s, e->transfer_s};
  };
  // t = a L + b X at both ends: a scales the latency, 1/b the bandwidth.
  const NcclTestsRow& small = rows.front();
  const NcclTestsRow& large = rows.back();
  const auto [ls, xs] = parts(small.bytes);
  const auto [ll, xl] = parts(large.bytes);
  const double det = ls * xl - ll * xs;
  double a = det != 0 ? (small.out_of_place.time_s * xl - large.out_of_place.time_s * xs) / det : 0;
  double b = det != 0 ? (ls * large.out_of_place.time_s - ll * small.out_of_place.time_s) / det : 0;
  if (!(a >= 0)) {  // the smallest size is faster than any latency would allow: bandwidth alone
    a = 0;
    b = large.out_of_place.time_s / xl;
  }
  if (!(b > 0)) refuse("the largest size is not slower than the smallest; nothing to fit a bandwidth to");

  NcclTestsFit fit;
  fit.link_id = spec.groups[0].gpu_link.id;
  fit.latency_scale = a;
  fit.bandwidth_scale = 1 / b;
  const double factor = bus_bandwidth_factor(op, log.ranks);
  for (const NcclTestsRow& r : rows) {
    const auto [l, x] = parts(r.bytes);
    const double t = a * l + b * x;
    fit.rows.push_back({r.bytes, r.out_of_place.time_s, t, r.out_of_place.busbw_Bps, r.bytes / t * factor});
  }
  Profile& p = fit.profile;
  p.file = log.file;
  p.provenance = {{"source", "nccl-tests log " + log.file},
                  {"collective", std::string(collective_op_name(op))},
                  {"algorithm", std::string(collective_algo_name(algo))},
                  {"ranks", std::to_string(log.ranks)},
                  {"node type", node_type}};
  if (!log.device.empty()) p.provenance.emplace_back("device", log.device);
  if (!log.version.empty()) p.provenance.emplace_back("nccl-tests", log.version);
  p.links.push_back({.id = fit.link_id, .bandwidth_Bps = {}, .latency_s = {}, .collective_latency_scale = a,
                     .collective_bandwidth_scale = 1 / b});
  for (const NcclTestsRow& r : rows) p.measurements.push_back({std::string(collective_op_name(op)), Dtype::fp32, r.bytes, r.out_of_place.time_s, ""});
  return fit;
}

}  // namespace fleetsim
