// The NCCL side of a CUDA replay over several processes (one MPI rank per GPU), as nccl-tests makes it: a
// communicator's unique id made on one rank and broadcast over MPI, each member joining with
// ncclCommInitRank. Built where CUDA, NCCL and MPI are all found (the MPI side is in ranks.hpp); used by
// the CUDA backend's device of a multi-process replay (docs/run.md#several-processes-mpirun).
#pragma once

#include <nccl.h>

#include <string>

#include "fleetsim/ranks.hpp"

namespace fleetsim::ranks {

// Every world rank calls this for every communicator, in the same order (the broadcast is collective
// over MPI_COMM_WORLD). `root` (a world rank) makes the unique id; this rank joins as member
// `comm_rank` on local GPU `cuda_ordinal`, or not at all when `comm_rank` is -1 (then it returns null).
// Throws DeviceError naming `where` and the MPI or NCCL error.
ncclComm_t join_communicator(int root, int members, int comm_rank, int cuda_ordinal, const std::string& where);

}  // namespace fleetsim::ranks
