// Built without MPI: one process is the whole world (ranks.hpp).
#include <chrono>

#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim::ranks {

World mpi_world() { return {}; }

World on_this_machine() { return {}; }

bool everywhere(bool mine) { return mine; }

std::vector<std::string> gather_on_machine(const std::string& mine) { return {mine}; }

double common_epoch_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<RankReport> gather_reports(const RankReport& mine) { return {mine}; }

}  // namespace fleetsim::ranks

namespace fleetsim::ranks {

// One process: a gang never spans ranks and no tensor leaves the process, so only meetings of one are asked for.
struct Transport::Impl {};
Transport::Transport(std::span<const std::vector<int>> groups) {
  if (!groups.empty()) throw DeviceError("this build has no MPI, so no gang can span processes");
}
Transport::~Transport() = default;
int Transport::max_tag() const { return 0; }
Transport::Meeting Transport::meet(std::size_t, double arrived_s, bool failed) { return {.last_s = arrived_s, .any_failed = failed}; }
void Transport::collective(std::size_t, CollectiveOp, float*, std::size_t) {}
void Transport::send(int, int, const void*, std::size_t) { throw DeviceError("this build has no MPI to send a tensor to another process"); }
void Transport::receive(int, int, void*, std::size_t) { throw DeviceError("this build has no MPI to receive a tensor from another process"); }
void Transport::progress() {}
void Transport::finish() {}

}  // namespace fleetsim::ranks
