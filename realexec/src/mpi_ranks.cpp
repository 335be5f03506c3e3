// The MPI side of a multi-node replay (ranks.hpp), built where MPI is found.
#include <mpi.h>

#include <chrono>
#include <numeric>

#include "fleetsim/ranks.hpp"
#include "mpi_check.hpp"

namespace fleetsim::ranks {

World mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return {};
  World w;
  FLEETSIM_MPI(std::string("reading the MPI world"), MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  FLEETSIM_MPI(std::string("reading the MPI world"), MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  return w;
}

double common_epoch_s() {
  if (mpi_world().size > 1) FLEETSIM_MPI(std::string("aligning the ranks' clocks"), MPI_Barrier(MPI_COMM_WORLD));
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<RankReport> gather_reports(const RankReport& mine) {
  const World w = mpi_world();
  if (w.size == 1) return {mine};
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
