#include "cuda_ranks.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <chrono>
#include <numeric>

#include "fleetsim/cuda_check.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim::ranks {
namespace {

void check_mpi(int code, const char* call, const std::string& where) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw DeviceError(where + ": " + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}
#define FLEETSIM_MPI(where, call) check_mpi((call), #call, (where))

}  // namespace

World mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return {};
  World w;
  FLEETSIM_MPI(std::string("reading the MPI world"), MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  FLEETSIM_MPI(std::string("reading the MPI world"), MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  return w;
}

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

double common_epoch_s() {
  FLEETSIM_MPI(std::string("aligning the ranks' clocks"), MPI_Barrier(MPI_COMM_WORLD));
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<RankReport> gather_reports(const RankReport& mine) {
  const World w = mpi_world();
  const std::string bytes = encode_rank_report(mine);
  const std::string where = "gathering the ranks' measured times on rank 0";
  int length = static_cast<int>(bytes.size());
  std::vector<int> lengths(static_cast<std::size_t>(w.size), 0), offsets(static_cast<std::size_t>(w.size), 0);
  FLEETSIM_MPI(where, MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (w.rank == 0) std::partial_sum(lengths.begin(), lengths.end() - 1, offsets.begin() + 1);
  std::string all(w.rank == 0 ? static_cast<std::size_t>(offsets.back() + lengths.back()) : 0, '\0');
  FLEETSIM_MPI(where, MPI_Gatherv(bytes.data(), length, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE, 0, MPI_COMM_WORLD));
  std::vector<RankReport> reports;
  if (w.rank != 0) return reports;
  for (int r = 0; r < w.size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    reports.push_back(decode_rank_report(std::string_view(all).substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lengths[i]))));
  }
  return reports;
}

}  // namespace fleetsim::ranks
