#include <iostream>

#include "distributed.hpp"

Distributed start_distributed() {
  if (launcher_ranks() > 1) {
    std::cerr << "fleetsim: note: built without MPI, so each of the " << launcher_ranks()
              << " processes mpirun started works alone\n";
  }
  return {};
}

void stop_distributed() {}
