#include <mpi.h>

#include <exception>
#include <numeric>

#include "distributed.hpp"

namespace {
bool joined = false;
}

Distributed start_distributed() {
  if (launcher_ranks() <= 1) return {};
  MPI_Init(nullptr, nullptr);
  joined = true;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Distributed d{static_cast<unsigned>(rank), static_cast<unsigned>(size), {}};
  d.exchange = [size](const std::string& mine) {
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size), 0);
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::partial_sum(lengths.begin(), lengths.end() - 1, offsets.begin() + 1);
    std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size; ++r) out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    return out;
  };
  return d;
}

void stop_distributed() {
  if (joined && std::uncaught_exceptions() == 0) MPI_Finalize();
  joined = false;
}
