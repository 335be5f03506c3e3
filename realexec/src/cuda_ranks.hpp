// The MPI and NCCL calls of a multi-node CUDA replay (one MPI rank per node), as nccl-tests makes
// them: a communicator's unique id made on one rank and broadcast over MPI, each member joining with
// ncclCommInitRank; a common epoch from an MPI barrier; every rank's report gathered on rank 0.
// Built where CUDA, NCCL and MPI are all found. Not yet called by execute_on_cuda: the cross-rank
// replay that would use them is not written (docs/run.md#several-nodes-mpirun).
#pragma once

#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

#include "fleetsim/ranks.hpp"

namespace fleetsim::ranks {

// This process's place in MPI_COMM_WORLD; {0, 1} when MPI has not been initialized (no mpirun).
struct World {
  int rank = 0, size = 1;
};
World mpi_world();

// One member of a communicator that lives on this rank: its rank in the communicator and the local
// GPU it runs on.
struct LocalMember {
  int comm_rank = 0;
  int cuda_ordinal = 0;
};

// Every world rank calls this for every communicator, in the same order (the broadcast is collective
// over MPI_COMM_WORLD). `root` (a world rank) makes the unique id; members on this rank join with it.
// Returns this rank's communicators, one per local member, in the order given. Throws DeviceError
// naming `where` and the MPI or NCCL error.
std::vector<ncclComm_t> join_communicator(int root, int members, const std::vector<LocalMember>& local, const std::string& where);

// Seconds on this rank's steady clock right after every rank has left an MPI barrier: the epoch that
// every rank's times are measured from. Ranks leave the barrier within its latency (microseconds on
// InfiniBand), which bounds how far apart their clocks are.
double common_epoch_s();

// Every rank's report, in rank order, on rank 0; an empty list on the other ranks.
std::vector<RankReport> gather_reports(const RankReport& mine);

}  // namespace fleetsim::ranks
