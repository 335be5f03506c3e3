// The ranks' epoch and gather over real MPI, run under mpirun with several ranks (tests/CMakeLists.txt).
// Each rank reports made-up phase times for its member of three gangs that span every rank, and one
// weight load; rank 0 gathers the reports, checks each is what its rank sent, merges them and checks
// that a phase ends with its last member and that the lowest failing member names the failure.
// Exit 0 when all holds, 1 with a message when not.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "fleetsim/ranks.hpp"

using namespace fleetsim;

namespace {

constexpr std::uint32_t kGangs = 3;

// What rank k sends: times that grow with k, and a failure of the last gang on every rank but 0.
RankReport report_of(int k) {
  RankReport r;
  const double s = 0.01 * k;
  for (std::uint32_t g = 0; g < kGangs; ++g) {
    r.members.push_back({.record = g, .member = static_cast<std::uint32_t>(k), .arrived_s = g + s, .loaded_s = g + 0.2 + s,
                         .computed_s = g + 0.5 + s, .done_s = g + 0.9 + s,
                         .failure = g == kGangs - 1 && k > 0 ? "failed on rank " + std::to_string(k) : ""});
  }
  r.loads.push_back({.load = static_cast<std::uint32_t>(k), .start_s = 10.0 + k, .end_s = 10.5 + k});
  return r;
}

bool same(const RankReport& a, const RankReport& b) { return encode_rank_report(a) == encode_rank_report(b); }

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAIL %s\n", what.c_str());
  ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    const ranks::World w = ranks::mpi_world();
    const double epoch = ranks::common_epoch_s();
    const std::vector<RankReport> reports = ranks::gather_reports(report_of(w.rank));
    if (w.rank != 0) {
      expect(reports.empty(), "a rank other than 0 receives no reports");
    } else {
      expect(w.size > 1, "run under mpirun with more than one rank (" + std::to_string(w.size) + " now)");
      expect(epoch > 0, "the epoch is a steady-clock time");
      expect(reports.size() == static_cast<std::size_t>(w.size), "rank 0 receives one report per rank");
      for (int k = 0; k < static_cast<int>(reports.size()); ++k) expect(same(reports[k], report_of(k)), "rank " + std::to_string(k) + "'s report arrives intact");
      Trace trace;
      trace.tasks.resize(kGangs);
      for (TaskRecord& r : trace.tasks) r.gpu_count = static_cast<std::uint32_t>(w.size);
      trace.weight_loads.resize(static_cast<std::size_t>(w.size));
      merge_rank_reports(trace, reports, [](std::uint32_t record) { return record == 0; });
      const double last = 0.01 * (w.size - 1);
      for (std::uint32_t g = 0; g < kGangs; ++g) {
        const TaskRecord& r = trace.tasks[g];
        const std::string name = "gang " + std::to_string(g);
        expect(r.start_s == g + last && r.compute_start_s == g + 0.2 + last && r.end_s == g + 0.9 + last, name + " ends each phase with its last member");
        expect((r.comm_start_s == g + 0.5 + last) == (g == 0), name + " has a communication phase only where it communicates");
      }
      const TaskRecord& failed = trace.tasks[kGangs - 1];
      expect(failed.status == TaskStatus::failed && trace.reasons[failed.reason] == "failed on rank 1", "the lowest failing member names the failure");
      expect(trace.tasks[0].status != TaskStatus::failed, "a gang without failures is not failed");
      for (int k = 0; k < w.size; ++k) expect(trace.weight_loads[static_cast<std::size_t>(k)].end_s == 10.5 + k, "rank " + std::to_string(k) + "'s weight load keeps its times");
      if (failures == 0) std::printf("ok   %d ranks: reports gathered intact on rank 0 and merged\n", w.size);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    ++failures;
  }
  int mine = failures, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  code = any == 0 ? 0 : 1;
  MPI_Finalize();
  return code;
}
