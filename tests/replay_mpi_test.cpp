// The CPU backend spread over MPI ranks, one per device of scenarios/cpu-validate.json (tests/CMakeLists.txt):
// under 2 ranks as shipped; under 4 on four workers with instances arriving close together, so that two
// gangs run on different pairs of ranks. Rank 0 must hold a measured run that keeps every rule of a replay
// (replay_check.hpp), with each gang's all-reduce timed; then a task that fails must fail its consumers
// on other ranks with the reasons a single-process run gives. Exit 0 when all holds, 1 with a message when not.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/scenario.hpp"
#include "replay_check.hpp"

using namespace fleetsim;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAIL %s\n", what.c_str());
  ++failures;
}

std::uint32_t task_named(const Workflow& wf, const std::string& name) {
  for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) {
    if (wf.tasks[t].name == name) return t;
  }
  throw std::invalid_argument("no task " + name);
}

std::string reason_of(const Trace& t, const TaskRecord& r) { return r.status == TaskStatus::failed ? t.reasons[r.reason] : std::string(); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  try {
    const ranks::World w = ranks::mpi_world();
    std::vector<ScenarioEdit> edits;
    if (w.size == 4) edits = {{"/cluster/nodes/0/node_overrides", R"({"gpus": 4})"}, {"/workload/0/arrival/interval", R"("0.002 s")"}};
    const Scenario sc = scale_work(load_scenario(FLEETSIM_SOURCE_DIR "/scenarios/cpu-validate.json", edits), 0.05);
    const RunResult plan = simulate(sc);
    const RunResult measured = execute_on_cpu(sc, plan);
    if (w.rank == 0) {
      for (const std::string& problem : test::replay_problems(sc, plan, measured)) expect(false, problem);
      const std::uint32_t gang = task_named(sc.workflows[0], "gang");
      bool timed = true;
      for (const TaskRecord& r : measured.trace.tasks) timed = timed && (r.task != gang || r.comm_start_s != kNever);
      expect(timed, "each gang's all-reduce has its communication phase");
      if (failures == 0) std::printf("ok   %d ranks: the replay keeps every rule\n", w.size);
    }

    // The stream task cannot allocate its working set (it runs on another device than the gang's first member).
    Scenario failing = sc;
    const std::uint32_t stream = task_named(failing.workflows[0], "stream");
    failing.workflows[0].tasks[stream].working_set_bytes = 1e18;
    const RunResult broken = execute_on_cpu(failing, plan);
    if (w.rank == 0) {
      const Workflow& wf = failing.workflows[0];
      for (const TaskRecord& r : broken.trace.tasks) {
        const std::string name = wf.tasks[r.task].name, reason = reason_of(broken.trace, r);
        const std::string device = plan.cluster.gpu_name(broken.trace.gpus[r.gpu_begin]);
        if (name == "stream") expect(reason.starts_with("on " + device + ": "), "stream fails on its own device (" + reason + ")");
        if (name == "gang") expect(reason == "its producer stream did not complete", "gang fails for its producer on the other rank (" + reason + ")");
        if (name == "join") expect(reason == "its producer gang did not complete", "join fails for its producer (" + reason + ")");
        if (name == "load" || name == "gemm") expect(r.status == TaskStatus::completed, name + " completes");
      }
      if (failures == 0) std::printf("ok   a failure on one rank fails its consumers on others\n");
    }
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    ++failures;
  }
  int mine = failures, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
