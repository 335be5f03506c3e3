// Built without MPI: one process is the whole world (ranks.hpp).
#include <chrono>

#include "fleetsim/ranks.hpp"

namespace fleetsim::ranks {

World mpi_world() { return {}; }

double common_epoch_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<RankReport> gather_reports(const RankReport& mine) { return {mine}; }

}  // namespace fleetsim::ranks
