// The batching component alone: keys shared by tasks of one model and operator across workflows,
// tasks held until their batch fills or max_wait passes, and batch slots reused.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/batching.hpp"
#include "run/events.hpp"

using namespace fleetsim;

namespace {

struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
          "workflows": {"chat": {"tasks": [{"name": "decode", "model": {"id": "m", "weights": "1 GB"},
                                            "work": {"operator": "unit-decode-step", "count": 1},
                                            "batching": {"max_size": 3, "max_wait": "10 ms"}}]},
                        "summary": {"tasks": [{"name": "decode", "model": {"id": "m", "weights": "1 GB"},
                                               "work": {"operator": "unit-decode-step", "count": 2},
                                               "batching": {"max_size": 3, "max_wait": "10 ms"}},
                                              {"name": "flop", "work": {"flop": "1 TFLOP"}, "batching": {"max_size": 3, "max_wait": "10 ms"}}]}},
          "workload": [{"workflow": "chat", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        predicted(sc, cluster, compute),
        batching(sc, predicted, queue, round_wanted) {
    batching.size_tasks(8);
  }
  TaskRecord record(std::uint32_t workflow, std::uint32_t task) const {
    TaskRecord r;
    r.workflow = workflow;
    r.task = task;
    return r;
  }
  ReadyTask ready_task(std::uint32_t id, std::uint32_t workflow, std::uint32_t task) const {
    ReadyTask t{};
    t.task = make_id<TaskId>(id);
    t.spec = &sc.workflows[workflow].tasks[task];
    return t;
  }

  Scenario sc;
  Cluster cluster;
  ComputeModel compute;
  run::Predictions predicted;
  EventQueue queue;
  bool round_wanted = false;
  run::Batching batching;
};

}  // namespace

TEST_CASE("tasks of one model and operator share a batching key across workflows", "[run][batching]") {
  Fixture f;
  CHECK(f.batching.key(f.record(0, 0)) == f.batching.key(f.record(1, 0)));
  CHECK(f.batching.key(f.record(1, 1)) != f.batching.key(f.record(0, 0)));  // FLOP and bytes: only with itself
}

TEST_CASE("held tasks join the ready queue when their batch fills or max_wait passes", "[run][batching]") {
  Fixture f;
  std::vector<ReadyTask> ready;
  const std::uint32_t key = f.batching.key(f.record(0, 0));
  CHECK(f.batching.hold(key, f.ready_task(0, 0, 0), ready));
  CHECK(f.batching.hold(key, f.ready_task(1, 1, 0), ready));
  CHECK(ready.empty());
  REQUIRE(f.queue.size() == 1);  // the release, max_wait after the first
  CHECK(f.queue.top().time_s == Approx(0.010));
  CHECK(f.queue.top().kind == run::kBatchRelease);
  CHECK(f.batching.hold(key, f.ready_task(2, 0, 0), ready));  // the third fills it
  CHECK(ready.size() == 3);
  CHECK(f.round_wanted);
  f.queue.pop();
  CHECK_FALSE(f.batching.release_due(key, ready));  // nothing held any more: a stale release

  f.batching.hold(key, f.ready_task(3, 0, 0), ready);
  f.batching.forget(make_id<TaskId>(3));
  f.queue.pop();
  CHECK_FALSE(f.batching.release_due(key, ready));
}

TEST_CASE("a batch's slot is reused once it is dissolved", "[run][batching]") {
  Fixture f;
  const std::uint32_t a = f.batching.open(make_id<TaskId>(0));
  f.batching.join(a, make_id<TaskId>(1));
  CHECK(f.batching.members(a).size() == 2);
  CHECK(f.batching.batch_of(make_id<TaskId>(1)) == a);
  f.batching.set_waiting(a, 2);
  CHECK_FALSE(f.batching.member_ready(a));
  CHECK(f.batching.member_ready(a));
  f.batching.dissolve(make_id<TaskId>(1));
  CHECK(f.batching.batch_of(make_id<TaskId>(0)) == run::Batching::kNone);
  CHECK(f.batching.members(a).size() == 2);  // readable until reused
  CHECK(f.batching.open(make_id<TaskId>(5)) == a);
}
