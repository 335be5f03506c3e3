#include <algorithm>
#include <cstdlib>
#include <string>

#include "distributed.hpp"

unsigned launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name)) return static_cast<unsigned>(std::max(0L, std::strtol(value, nullptr, 10)));
  }
  return 0;
}

unsigned launcher_ranks() {
  // Open MPI, then MPICH and Intel MPI (PMI).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) {
      const long n = std::strtol(value, nullptr, 10);
      if (n > 0) return static_cast<unsigned>(n);
    }
  }
  return 1;
}
