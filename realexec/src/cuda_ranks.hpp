// The NCCL side of a CUDA replay over several processes (one MPI rank per GPU), as nccl-tests makes it: a
// communicator's unique id made on one rank and broadcast over MPI, each member joining with
// ncclCommInitRank. Built where CUDA, NCCL and MPI are all found (the MPI side is in ranks.hpp); used by
// the CUDA backend's device of a multi-process replay (docs/run.md#several-processes-mpirun).
#pragma once

#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

#include "fleetsim/ranks.hpp"

namespace fleetsim::ranks {

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

}  // namespace fleetsim::ranks
