// Outside measurements: the output of NVIDIA's nccl-tests (all_reduce_perf and friends) read into
// rows, and fitted to the link class the collective ran over, so that a cluster one does not have
// locally can still be calibrated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/collective.hpp"
#include "fleetsim/profile.hpp"

namespace fleetsim {

struct NcclTestsResult {
  double time_s = 0;
  double algbw_Bps = 0;
  double busbw_Bps = 0;
  std::int64_t wrong = -1;  // -1: not checked (N/A, validation off)
};

// One timed run as nccl-tests reports it: algbw = bytes / time, busbw = algbw * the op's bus
// bandwidth factor on `ranks` ranks (bus_bandwidth_factor, collective.hpp). `bytes` follows
// nccl-tests' size column (all-gather: the gathered output; reduce-scatter: the input).
NcclTestsResult nccl_tests_result(CollectiveOp op, std::size_t ranks, double bytes, double time_s);

// One size of the sweep, as the log's columns give it.
struct NcclTestsRow {
  std::size_t line = 0;
  double bytes = 0;
  std::uint64_t count = 0;
  std::string type, redop;
  std::int64_t root = -1;  // -1 where the op has no root or the log has no root column
  NcclTestsResult out_of_place, in_place;
};

struct NcclTestsLog {
  std::string file;
  std::string version;               // "# nccl-tests version ..." where the log has it
  std::optional<CollectiveOp> op;    // from "# Collective test starting: X_perf" where the log has it
  std::size_t ranks = 0;             // "#  Rank N ..." lines
  std::vector<std::string> hosts;    // distinct host names, in rank order
  std::string device;                // rank 0's device name
  std::vector<NcclTestsRow> rows;
  std::optional<double> avg_busbw_Bps;
};

// Reads both layouts nccl-tests has printed (with and without the root column; "#wrong" or
// "error"), with or without MPI rank prefixes such as "[0]". Throws InputError naming the file, the
// line and the column for a malformed row, a row that failed validation (#wrong > 0), or a log with
// no rows or no rank lines.
NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file);
NcclTestsLog load_nccl_tests_log(const std::string& path);

// Measured times of one collective at several sizes: an nccl-tests log (its out-of-place times), or
// a CSV whose header is "bytes,time_us" with one row per size, for measurements taken otherwise.
struct MeasuredCollective {
  std::string file;
  std::optional<CollectiveOp> op;  // where the file names it
  std::size_t ranks = 0;           // 0: the file does not say
  std::vector<std::pair<double, double>> rows;  // bytes (nccl-tests' size), seconds; by size
};
// Strict: a malformed row, a non-positive size or time, or a repeated size is an InputError naming
// the file and line.
MeasuredCollective parse_measured_collective(std::string_view text, const std::string& file);
MeasuredCollective load_measured_collective(const std::string& path);

// What the fit found, per row, against the log.
struct NcclTestsFitRow {
  double bytes = 0;
  double measured_s = 0, fitted_s = 0;     // out-of-place time; the calibrated model's time
  double measured_busbw_Bps = 0, fitted_busbw_Bps = 0;
};

struct NcclTestsFit {
  Profile profile;  // one link calibration (the collective scales), the measurements, provenance
  std::string link_id;
  double latency_scale = 1, bandwidth_scale = 1;  // of the collective model's achieved time on the link
  std::vector<NcclTestsFitRow> rows;
};

// Fits the log to `node_type`'s GPU link as fleetsim's collective model (fleetsim/nccl.hpp) runs `op`
// with `algo` on the log's ranks inside one node: with NCCL's choice per size held, the model's time
// is latency_scale * L + S / (bandwidth_scale * B), and the two scales make the smallest size's time
// and the largest size's (its bus bandwidth, where NCCL's curve flattens) exact. The other sizes'
// error is in `rows`. Throws InputError for logs the model cannot represent (ranks over the node's
// GPUs, several hosts, a GPU NCCL's model does not cover, an op the algorithm cannot run, fewer than
// two sizes).
NcclTestsFit fit_nccl_tests(const NcclTestsLog& log, CollectiveOp op, CollectiveAlgo algo, const std::string& node_type);

}  // namespace fleetsim
