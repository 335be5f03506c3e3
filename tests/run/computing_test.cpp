// The computing component alone: a gang's compute ends with its members' share, an overlapped
// collective starts early, tasks on a time-sliced GPU slow each other (their old events go stale),
// and an ended run's events are stale.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/computing.hpp"

using namespace fleetsim;

namespace {

// Node n0: two GPUs; node n1: one GPU taking two tasks at once (no interference).
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1},
                                                         {"type": "unit-node-1", "count": 1, "time_slicing": {"tasks": 2}}]},
          "workflows": {"w": {"tasks": [
              {"name": "solo", "work": {"flop": "100 TFLOP"}},
              {"name": "overlapped", "gpus": 2, "work": {"flop": "100 TFLOP"},
               "collective": {"op": "all-reduce", "bytes": "1 GB", "overlap": 0.25}},
              {"name": "after", "gpus": 2, "work": {"flop": "100 TFLOP"}, "collective": {"op": "all-reduce", "bytes": "1 GB"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        recovery(sc.faults, /*restartable=*/false),
        occupancy(sc, cluster, trace, round_wanted) {}
  // Places a task of workflow "w" on `gpus`.
  TaskId place(std::uint32_t local, std::vector<std::uint32_t> gpus) {
    TaskRecord r;
    r.task = local;
    r.gpu_begin = static_cast<std::uint32_t>(trace.gpus.size());
    r.gpu_count = static_cast<std::uint32_t>(gpus.size());
    for (std::uint32_t g : gpus) trace.gpus.push_back(make_id<GpuId>(g));
    trace.tasks.push_back(r);
    return make_id<TaskId>(static_cast<std::uint32_t>(trace.tasks.size() - 1));
  }
  double solo_s(std::uint32_t local, double share) const {
    return compute.of(sc.workflows[0].tasks[local], cluster.gpu_type(make_id<GpuId>(0)), share).total_s();
  }
  Event pop() { return queue.pop(); }
  // The computing component, once the tasks are placed (its tables sized by them).
  void make_computing(bool restartable) {
    computing.emplace(sc, cluster, compute, trace, occupancy, recovery, queue, restartable);
    computing->size_tasks({.tasks = trace.tasks.size()});
  }

  Scenario sc;
  Cluster cluster;
  ComputeModel compute;
  Trace trace;
  EventQueue queue;
  bool round_wanted = false;
  run::Recovery recovery;
  run::Occupancy occupancy;
  std::optional<run::Computing> computing;
};

}  // namespace

TEST_CASE("a gang computes its share and an overlapped collective starts before the compute ends", "[run][computing]") {
  Fixture f;
  const TaskId overlapped = f.place(1, {0, 1});
  const TaskId after = f.place(2, {0, 1});
  f.make_computing(false);
  f.computing->start(overlapped, 1);
  const double half_s = f.solo_s(1, 0.5);
  REQUIRE(f.queue.size() == 2);
  Event e = f.pop();
  CHECK(run::kind_of(e) == run::kCommStart);
  CHECK(e.time_s == Approx(0.75 * half_s));
  e = f.pop();
  CHECK(run::kind_of(e) == run::kComputeDone);
  CHECK(e.time_s == Approx(half_s));
  CHECK(f.occupancy.free_at_s(0) == Approx(half_s));  // predicted from the declared work
  CHECK_FALSE(f.computing->compute_done(overlapped));  // its collective already started
  CHECK_FALSE(f.computing->part_done(overlapped));     // compute done, collective not
  CHECK(f.computing->part_done(overlapped));

  f.computing->start(after, 1);
  REQUIRE(f.queue.size() == 1);  // the collective follows the compute
  CHECK(f.computing->compute_done(after));
}

TEST_CASE("tasks on a time-sliced GPU share it: a second task re-paces the first, whose old end goes stale", "[run][computing]") {
  Fixture f;
  const TaskId a = f.place(0, {2});
  const TaskId b = f.place(0, {2});
  f.make_computing(false);
  const double alone_s = f.solo_s(0, 1);
  f.computing->start(a, 1);
  REQUIRE(f.queue.size() == 1);
  const Event a_alone = f.queue.top();
  CHECK(a_alone.time_s == Approx(alone_s));
  CHECK(f.computing->sharing(a));
  f.computing->start(b, 1);  // from now on each computes at half pace: both end at 2 x alone
  CHECK_FALSE(f.computing->current(run::stamp_of(a_alone), index(a)));
  f.pop();  // the stale end
  std::vector<double> ends;
  while (!f.queue.empty()) {
    const Event e = f.pop();
    if (f.computing->current(run::stamp_of(e), e.subject)) ends.push_back(e.time_s);
  }
  REQUIRE(ends.size() == 2);
  CHECK(ends[0] == Approx(2 * alone_s));
  CHECK(ends[1] == Approx(2 * alone_s));
}

TEST_CASE("an ended run's events are stale, and compute done is measured at the task's pace", "[run][computing]") {
  Fixture f;
  const TaskId a = f.place(0, {2});
  const TaskId b = f.place(0, {2});
  f.make_computing(/*restartable=*/true);
  f.computing->start(a, 1);
  f.computing->start(b, 1);
  CHECK(f.computing->computed_s(a, 0) == 0);
  f.computing->leave(b);  // b stopped: a computes alone again
  f.computing->end_run(b);
  int b_events = 0, a_current = 0;
  while (!f.queue.empty()) {
    const Event e = f.pop();
    if (e.subject == index(b)) {
      ++b_events;
      CHECK_FALSE(f.computing->current(run::stamp_of(e), e.subject));
    } else if (f.computing->current(run::stamp_of(e), e.subject)) {
      ++a_current;
    }
  }
  CHECK(b_events > 0);
  CHECK(a_current == 1);  // a's one current end
  CHECK_FALSE(f.computing->sharing(b));
}
