// The MPI side of a multi-process replay (ranks.hpp), built where MPI is found.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <limits>
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

namespace {

// The ranks on this machine, as a communicator the caller frees.
MPI_Comm machine_comm(const std::string& where) {
  MPI_Comm machine = MPI_COMM_NULL;
  FLEETSIM_MPI(where, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine));
  return machine;
}

}  // namespace

World on_this_machine() {
  if (mpi_world().size == 1) return {};
  const std::string where = "finding the ranks on this machine";
  MPI_Comm machine = machine_comm(where);
  World w;
  FLEETSIM_MPI(where, MPI_Comm_rank(machine, &w.rank));
  FLEETSIM_MPI(where, MPI_Comm_size(machine, &w.size));
  FLEETSIM_MPI(where, MPI_Comm_free(&machine));
  return w;
}

bool everywhere(bool mine) {
  if (mpi_world().size == 1) return mine;
  int in = mine ? 1 : 0, all = 0;
  FLEETSIM_MPI(std::string("asking every rank"), MPI_Allreduce(&in, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  return all != 0;
}

std::vector<std::string> gather_on_machine(const std::string& mine) {
  if (mpi_world().size == 1) return {mine};
  const std::string where = "gathering from the ranks on this machine";
  MPI_Comm machine = machine_comm(where);
  int size = 1;
  FLEETSIM_MPI(where, MPI_Comm_size(machine, &size));
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size), 0);
  FLEETSIM_MPI(where, MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, machine));
  std::partial_sum(lengths.begin(), lengths.end() - 1, offsets.begin() + 1);
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  FLEETSIM_MPI(where, MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, machine));
  FLEETSIM_MPI(where, MPI_Comm_free(&machine));
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

double common_epoch_s() {
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  if (mpi_world().size == 1) return now();
  const std::string where = "aligning the ranks' clocks";
  // Ranks on one machine read one steady clock, so they take their first rank's reading and agree exactly.
  MPI_Comm machine = machine_comm(where);
  FLEETSIM_MPI(where, MPI_Barrier(MPI_COMM_WORLD));
  double epoch = now();
  FLEETSIM_MPI(where, MPI_Bcast(&epoch, 1, MPI_DOUBLE, 0, machine));
  FLEETSIM_MPI(where, MPI_Comm_free(&machine));
  return epoch;
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

namespace fleetsim::ranks {
namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;  // MPI counts are ints: larger messages go in pieces

int count_of(std::size_t n, const std::string& where) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw DeviceError(where + ": " + std::to_string(n) + " elements are more than one MPI call can move");
  }
  return static_cast<int>(n);
}

}  // namespace

struct Transport::Impl {
  MPI_Comm world = MPI_COMM_NULL;   // this replay's own copy, so its tags meet nothing else
  std::vector<MPI_Comm> groups;     // MPI_COMM_NULL where this rank is not a member
  std::vector<MPI_Request> sends;
  std::vector<int> completed;  // MPI_Testsome's indices, kept so progress() allocates nothing
  int max_tag = 32767;
};

Transport::Transport(std::span<const std::vector<int>> groups) : impl_(std::make_unique<Impl>()) {
  const std::string where = "setting up the ranks' communicators";
  FLEETSIM_MPI(where, MPI_Comm_dup(MPI_COMM_WORLD, &impl_->world));
  // Errors come back as codes, so they throw DeviceError (the gangs' communicators inherit it).
  FLEETSIM_MPI(where, MPI_Comm_set_errhandler(impl_->world, MPI_ERRORS_RETURN));
  void* tag_ub = nullptr;
  int found = 0;
  FLEETSIM_MPI(where, MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
  if (found != 0) impl_->max_tag = *static_cast<int*>(tag_ub);
  const int me = mpi_world().rank;
  for (const std::vector<int>& members : groups) {
    const auto at = std::find(members.begin(), members.end(), me);
    const int colour = at == members.end() ? MPI_UNDEFINED : 0;
    MPI_Comm comm = MPI_COMM_NULL;
    // The key orders the communicator's ranks as the gang's members.
    FLEETSIM_MPI(where, MPI_Comm_split(impl_->world, colour, static_cast<int>(at - members.begin()), &comm));
    impl_->groups.push_back(comm);
  }
}

Transport::~Transport() {
  for (MPI_Comm& c : impl_->groups) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
  if (impl_->world != MPI_COMM_NULL) MPI_Comm_free(&impl_->world);
}

int Transport::max_tag() const { return impl_->max_tag; }

Transport::Meeting Transport::meet(std::size_t group, double arrived_s, bool failed) {
  double mine[2] = {arrived_s, failed ? 1.0 : 0.0}, all[2] = {0, 0};
  FLEETSIM_MPI(std::string("a gang's members meeting"), MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, impl_->groups.at(group)));
  return {.last_s = all[0], .any_failed = all[1] > 0};
}

void Transport::collective(std::size_t group, CollectiveOp op, float* buffer, std::size_t count) {
  const std::string where = "a gang's " + std::string(collective_op_name(op));
  MPI_Comm comm = impl_->groups.at(group);
  int rank = 0, size = 1;
  FLEETSIM_MPI(where, MPI_Comm_rank(comm, &rank));
  FLEETSIM_MPI(where, MPI_Comm_size(comm, &size));
  const int n = count_of(count, where);
  float* receive = buffer + count;
  // Member j's chunk of the data: as cpu::collective divides it.
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  for (int j = 0; j < size; ++j) {
    offsets[static_cast<std::size_t>(j)] = static_cast<int>(count * static_cast<std::size_t>(j) / static_cast<std::size_t>(size));
    counts[static_cast<std::size_t>(j)] = static_cast<int>(count * static_cast<std::size_t>(j + 1) / static_cast<std::size_t>(size)) -
                                          offsets[static_cast<std::size_t>(j)];
  }
  switch (op) {
    case CollectiveOp::all_reduce:
      FLEETSIM_MPI(where, MPI_Allreduce(MPI_IN_PLACE, buffer, n, MPI_FLOAT, MPI_SUM, comm));
      break;
    case CollectiveOp::all_gather:
      FLEETSIM_MPI(where, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, counts.data(), offsets.data(), MPI_FLOAT, comm));
      break;
    case CollectiveOp::reduce_scatter:
      FLEETSIM_MPI(where, MPI_Reduce_scatter(buffer, receive, counts.data(), MPI_FLOAT, MPI_SUM, comm));
      break;
    case CollectiveOp::broadcast:
      FLEETSIM_MPI(where, MPI_Bcast(buffer, n, MPI_FLOAT, 0, comm));
      break;
    case CollectiveOp::reduce:
      FLEETSIM_MPI(where, MPI_Reduce(rank == 0 ? MPI_IN_PLACE : buffer, buffer, n, MPI_FLOAT, MPI_SUM, 0, comm));
      break;
    case CollectiveOp::all_to_all:
      // Equal chunks (count / members floats each; up to members - 1 floats of the data stay home).
      FLEETSIM_MPI(where, MPI_Alltoall(buffer, n / size, MPI_FLOAT, receive, n / size, MPI_FLOAT, comm));
      break;
    case CollectiveOp::send_recv:
      // Each member sends its data to the next, as a pipeline stage passes activations on.
      FLEETSIM_MPI(where, MPI_Sendrecv(buffer, n, MPI_FLOAT, rank + 1 < size ? rank + 1 : MPI_PROC_NULL, 0, receive, n, MPI_FLOAT,
                                       rank > 0 ? rank - 1 : MPI_PROC_NULL, 0, comm, MPI_STATUS_IGNORE));
      break;
  }
}

void Transport::send(int to, int tag, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  const std::string where = "sending a tensor to rank " + std::to_string(to);
  do {  // a message of no bytes is still sent: the receiver waits for it
    const std::size_t n = std::min(bytes, kPiece);
    MPI_Request request = MPI_REQUEST_NULL;
    FLEETSIM_MPI(where, MPI_Isend(p, static_cast<int>(n), MPI_BYTE, to, tag, impl_->world, &request));
    impl_->sends.push_back(request);
    p += n;
    bytes -= n;
  } while (bytes > 0);
}

void Transport::receive(int from, int tag, void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  const std::string where = "receiving a tensor from rank " + std::to_string(from);
  do {
    const std::size_t n = std::min(bytes, kPiece);
    FLEETSIM_MPI(where, MPI_Recv(p, static_cast<int>(n), MPI_BYTE, from, tag, impl_->world, MPI_STATUS_IGNORE));
    p += n;
    bytes -= n;
  } while (bytes > 0);
}

void Transport::progress() {
  std::vector<MPI_Request>& sends = impl_->sends;
  if (sends.empty()) return;
  int done = 0;
  impl_->completed.resize(sends.size());
  FLEETSIM_MPI("sending tensors", MPI_Testsome(static_cast<int>(sends.size()), sends.data(), &done, impl_->completed.data(), MPI_STATUSES_IGNORE));
  std::erase(sends, MPI_REQUEST_NULL);  // the sends that completed
}

void Transport::finish() {
  FLEETSIM_MPI(std::string("sending tensors"), MPI_Waitall(static_cast<int>(impl_->sends.size()), impl_->sends.data(), MPI_STATUSES_IGNORE));
  impl_->sends.clear();
}

}  // namespace fleetsim::ranks
