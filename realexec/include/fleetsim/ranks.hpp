// Multi-node replay on the CUDA backend, one MPI rank per node (docs/run.md#several-nodes-mpirun): which
// rank runs which of the plan's GPUs, and how the phase times each rank measured become one trace on
// rank 0. The pure functions are tested without MPI or a GPU; the MPI calls that move their values between
// ranks (namespace ranks, below) are built where MPI is found, and tested under mpirun; without MPI, one
// process is the whole world. The NCCL calls are in src/cuda_ranks.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/simulation.hpp"

namespace fleetsim {

// The rank that runs each of the plan's GPUs (-1: it runs nothing): the nodes on which the plan completed
// work, in index order, take ranks 0, 1, ... Throws DeviceError when `ranks` is not that node count.
std::vector<int> rank_of_each_gpu(const RunResult& plan, unsigned ranks);

// One gang member's phase boundaries for one task record, in seconds since the ranks' common epoch
// (an MPI_Barrier, then each rank's own clock; docs/run.md says how far apart the clocks can be).
struct MemberTimes {
  std::uint32_t record = 0, member = 0;  // into Trace::tasks; index in the task's gang
  double arrived_s = 0, loaded_s = 0, computed_s = 0, done_s = 0;
  std::string failure;  // empty: this member did its part
};

// One weight load's copy, as timed on the rank of its GPU.
struct LoadTimes {
  std::uint32_t load = 0;  // into Trace::weight_loads
  double start_s = 0, end_s = 0;
};

// What one rank sends rank 0 when its tasks have ended.
struct RankReport {
  std::vector<MemberTimes> members;
  std::vector<LoadTimes> loads;
};

// Bytes for MPI_Gatherv, and back (ranks of one run share an architecture, so numbers travel as their
// bytes). decode_rank_report throws std::invalid_argument naming what is malformed.
std::string encode_rank_report(const RankReport& report);
RankReport decode_rank_report(std::string_view bytes);

// A task's phase ends when its last member ends it: each named record's start_s, compute_start_s,
// comm_start_s (where `communicates(record)`) and end_s become the latest of its members' times. A
// member's failure fails the record with the failure of the lowest member that has one. Weight loads
// take their times. Records and loads not named keep their fields.
void merge_rank_reports(Trace& trace, std::span<const RankReport> reports, const std::function<bool(std::uint32_t record)>& communicates);

namespace ranks {

// This process's place in MPI_COMM_WORLD; {0, 1} when MPI has not been initialized (no mpirun).
struct World {
  int rank = 0, size = 1;
};
World mpi_world();

// Seconds on this rank's steady clock right after every rank has left an MPI barrier: the epoch that
// every rank's times are measured from. Ranks leave the barrier within its latency (microseconds on
// InfiniBand), which bounds how far apart their clocks are.
double common_epoch_s();

// Every rank's report, in rank order, on rank 0; an empty list on the other ranks. Throws DeviceError
// naming the MPI error.
std::vector<RankReport> gather_reports(const RankReport& mine);

}  // namespace ranks

}  // namespace fleetsim
