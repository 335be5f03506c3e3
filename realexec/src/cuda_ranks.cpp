#include "cuda_ranks.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include "fleetsim/cuda_check.hpp"
#include "mpi_check.hpp"

namespace fleetsim::ranks {

std::vector<ncclComm_t> join_communicator(int root, int members, const std::vector<LocalMember>& local, const std::string& where) {
  ncclUniqueId id{};
  if (mpi_world().rank == root) FLEETSIM_CUDA(where, ncclGetUniqueId(&id));
  FLEETSIM_MPI(where, MPI_Bcast(&id, sizeof id, MPI_BYTE, root, MPI_COMM_WORLD));
  std::vector<ncclComm_t> comms(local.size(), nullptr);
  if (local.empty()) return comms;
  // Several members on one rank join from one thread: inside a group, or the first would wait for the others.
  FLEETSIM_CUDA(where, ncclGroupStart());
  for (std::size_t i = 0; i < local.size(); ++i) {
    FLEETSIM_CUDA(where, cudaSetDevice(local[i].cuda_ordinal));
    FLEETSIM_CUDA(where, ncclCommInitRank(&comms[i], members, id, local[i].comm_rank));
  }
  FLEETSIM_CUDA(where, ncclGroupEnd());
  return comms;
}

}  // namespace fleetsim::ranks
