// A replay spread over several processes, one MPI rank per device of the plan that runs work
// (docs/run.md#several-processes-mpirun): which rank runs which device, how the ranks meet and pass
// tensors, and how the phase times each rank measured become one trace on rank 0. The pure functions
// are tested without MPI; the MPI calls (namespace ranks, below) are built where MPI is found and tested
// under mpirun; without MPI, one process is the whole world. The NCCL calls are in src/cuda_ranks.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/collective.hpp"
#include "fleetsim/simulation.hpp"

namespace fleetsim {

// The rank that runs each of the plan's GPUs (-1: it runs nothing): the GPUs on which the plan completed
// work, in index order, take ranks 0, 1, ... Throws DeviceError when `ranks` is not that GPU count.
std::vector<int> rank_of_each_gpu(const RunResult& plan, unsigned ranks);

// One gang member's phase boundaries for one task record, in seconds since the ranks' common epoch
// (ranks::common_epoch_s).
struct MemberTimes {
  std::uint32_t record = 0, member = 0;  // into Trace::tasks; index in the task's gang
  double arrived_s = 0, loaded_s = 0, computed_s = 0, done_s = 0;
  std::string failure;  // empty: this member did its part
};

// One weight load's copy, as timed on the rank of its GPU.
struct LoadTimes {
  std::uint32_t load = 0;  // into Trace::weight_loads
  double start_s = 0, end_s = 0;
};

// What one rank sends rank 0 when its tasks have ended.
struct RankReport {
  std::vector<MemberTimes> members;
  std::vector<LoadTimes> loads;
};

// Bytes for MPI_Gatherv, and back (ranks of one run share an architecture, so numbers travel as their
// bytes). decode_rank_report throws std::invalid_argument naming what is malformed.
std::string encode_rank_report(const RankReport& report);
RankReport decode_rank_report(std::string_view bytes);

// A task's phase ends when its last member ends it: each named record's start_s, compute_start_s,
// comm_start_s (where `communicates(record)`) and end_s become the latest of its members' times. A
// member's failure fails the record with the failure of the lowest member that has one. Weight loads
// take their times. Records and loads not named keep their fields.
void merge_rank_reports(Trace& trace, std::span<const RankReport> reports, const std::function<bool(std::uint32_t record)>& communicates);

// The MPI side. An MPI error throws DeviceError naming it where MPI returns errors: always on the
// transport's own communicators, and on MPI_COMM_WORLD where its handler is MPI_ERRORS_RETURN; under
// MPI's default handler (fleetsim's command line keeps it) an error there stops the whole job.
namespace ranks {

// This process's place in MPI_COMM_WORLD; {0, 1} when MPI has not been initialized (no mpirun).
struct World {
  int rank = 0, size = 1;
};
World mpi_world();

// This rank's place among the ranks on its machine (those that share memory); {0, 1} without MPI.
World on_this_machine();

// Whether `mine` holds on every rank (`mine` itself without MPI).
bool everywhere(bool mine);

// Every rank's text on this machine, in its order on the machine (an all-gather among them).
std::vector<std::string> gather_on_machine(const std::string& mine);

// Seconds on this rank's steady clock when every rank has left an MPI barrier: the epoch that every
// rank's times are measured from. Ranks on one machine share one reading, so their times compare
// exactly; machines differ by how far apart their first ranks left the barrier (microseconds on
// InfiniBand).
double common_epoch_s();

// Every rank's report, in rank order, on rank 0; an empty list on the other ranks. Throws DeviceError
// naming the MPI error.
std::vector<RankReport> gather_reports(const RankReport& mine);

// How the ranks of one replay meet and pass tensors. Built on a duplicate of MPI_COMM_WORLD, so its tags
// are its own. Every call that fails throws DeviceError naming the MPI error.
class Transport {
 public:
  // `groups`: the ranks of every gang that spans ranks, each in member order, the same list in the same
  // order on every rank (each becomes a communicator; every rank takes part in making each).
  explicit Transport(std::span<const std::vector<int>> groups);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // The largest message tag this MPI allows (at least 32767).
  int max_tag() const;

  // The members of `group` meet: each gives the time it arrived and whether it failed, and every member
  // learns the latest arrival and whether any failed.
  struct Meeting {
    double last_s = 0;
    bool any_failed = false;
  };
  Meeting meet(std::size_t group, double arrived_s, bool failed);

  // A gang's collective over its members' buffers, each 2 x `count` floats as for cpu::collective: the
  // data, then room to receive. all-reduce leaves the element-wise sum in every member's first `count`.
  void collective(std::size_t group, CollectiveOp op, float* buffer, std::size_t count);

  // Starts sending `bytes` to rank `to` and returns; the bytes must stay as they are until finish().
  // Messages with the same destination and tag arrive in the order they were sent.
  void send(int to, int tag, const void* data, std::size_t bytes);
  // Waits for the message with this tag from rank `from`, whatever else has arrived before it.
  void receive(int from, int tag, void* data, std::size_t bytes);
  // Lets sends in flight move on (MPI moves a large message only while its sender is inside MPI).
  void progress();
  // Waits until every send has been delivered.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ranks

}  // namespace fleetsim
