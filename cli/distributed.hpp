// Several processes started by mpirun share a plan's search. With one process (or a fleetsim built
// without MPI) this is a no-op.
#pragma once

#include <functional>
#include <string>
#include <vector>

struct Distributed {
  unsigned rank = 0, ranks = 1;
  // Every rank's text, in rank order, on every rank (an all-gather); unset with one process.
  std::function<std::vector<std::string>(const std::string& mine)> exchange;
};

// Joins the MPI job when mpirun started this process among several; otherwise one process.
Distributed start_distributed();
// Leaves the MPI job. After an error it does not: a rank that ends without MPI_Finalize makes mpirun
// stop the others, where finalizing would leave them waiting for it.
void stop_distributed();
struct StopDistributed {
  ~StopDistributed() { stop_distributed(); }
};

// The number of processes a launcher started, from its environment (1 without one).
unsigned launcher_ranks();
// This process's rank among them, from the same (0 without one): known before MPI starts.
unsigned launcher_rank();
