#include "cuda_ranks.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include "fleetsim/cuda_check.hpp"
#include "mpi_check.hpp"

namespace fleetsim::ranks {

ncclComm_t join_communicator(int root, int members, int comm_rank, int cuda_ordinal, const std::string& where) {
  ncclUniqueId id{};
  if (mpi_world().rank == root) FLEETSIM_CUDA(where, ncclGetUniqueId(&id));
  FLEETSIM_MPI(where, MPI_Bcast(&id, sizeof id, MPI_BYTE, root, MPI_COMM_WORLD));
  if (comm_rank < 0) return nullptr;
  ncclComm_t comm = nullptr;
  FLEETSIM_CUDA(where, cudaSetDevice(cuda_ordinal));
  FLEETSIM_CUDA(where, ncclCommInitRank(&comm, members, id, comm_rank));
  return comm;
}

}  // namespace fleetsim::ranks
