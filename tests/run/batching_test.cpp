// The batching component alone: keys shared by tasks of one model and operator across workflows,
// tasks held until their batch fills or max_wait passes, batches formed from the round's leftovers and
// computed as one, and batch slots reused.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/batching.hpp"
#include "run/events.hpp"

using namespace fleetsim;

namespace {

// Places the first ready task on GPU 0.
class PlaceFirst : public Policy {
 public:
  void schedule(const ClusterView&, std::span<const ReadyTask> ready, Decisions& out) override {
    if (!ready.empty()) out.place(0, std::vector<GpuId>{make_id<GpuId>(0)});
  }
};

struct Fixture : run::RoundHost, run::BatchHost {
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
        memory({80e9}),
        occupancy(sc, cluster, trace, round_wanted),
        round(sc, std::make_unique<PlaceFirst>(), cluster, occupancy, memory, predicted, trace, queue, true),
        batching(sc, cluster, trace, predicted, compute, occupancy, memory, queue, round_wanted) {
    batching.size_tasks({.tasks = 8});
    // Tasks 0, 2 and 4 decode "chat", 1 decodes "summary" (twice the steps), 3 is "summary"'s FLOP task.
    for (auto [workflow, task] : {std::pair{0u, 0u}, {1u, 0u}, {0u, 0u}, {1u, 1u}, {0u, 0u}}) trace.tasks.push_back(record(workflow, task));
    occupancy.size_instances({.instances = 1});
  }

  // The run's side, in brief.
  ClusterView view() const override { return occupancy.view(memory, compute, {}, 0); }
  void start(TaskId task, std::span<const GpuId> gpus) override {
    place(task, gpus[0]);
    occupancy.add_task(index(gpus[0]), index(task));
  }
  void fail(TaskId, const std::string&) override {}
  void preempt(TaskId, const Decisions::Preemption&) override {}
  void fill_batch(TaskId leader) override { batching.fill(leader, round, *this); }
  void place_member(TaskId member, TaskId, GpuId gpu) override { place(member, gpu); }
  void send_inputs(TaskId member, GpuId) override { sent.push_back(member); }
  bool inputs_pending(TaskId member) const override { return member == waiting_for_inputs; }
  void compute_batch(const std::vector<TaskId>& members, const ComputeEstimate& estimate) override {
    computed = members;
    batch_s = estimate.total_s();
  }
  void place(TaskId task, GpuId gpu) {
    TaskRecord& r = trace.tasks[index(task)];
    r.status = TaskStatus::running;
    r.gpu_begin = static_cast<std::uint32_t>(trace.gpus.size());
    r.gpu_count = 1;
    trace.gpus.push_back(gpu);
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
  Trace trace;
  GpuMemory memory;
  run::Occupancy occupancy;
  run::PolicyRound round;
  run::Batching batching;
  std::vector<TaskId> sent, computed;
  TaskId waiting_for_inputs = make_id<TaskId>(99);
  double batch_s = 0;
};

}  // namespace

TEST_CASE("tasks of one model and operator share a batching key across workflows", "[run][batching]") {
  Fixture f;
  CHECK(f.batching.key(f.record(0, 0)) == f.batching.key(f.record(1, 0)));
  CHECK(f.batching.key(f.record(1, 1)) != f.batching.key(f.record(0, 0)));  // FLOP and bytes: only with itself
}

TEST_CASE("held tasks join the ready queue when their batch fills or max_wait passes", "[run][batching]") {
  Fixture f;
  run::ReadyQueue ready;
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
  f.batching.dissolve(make_id<TaskId>(1));
  CHECK(f.batching.batch_of(make_id<TaskId>(0)) == run::Batching::kNone);
  CHECK(f.batching.members(a).size() == 2);  // readable until reused
  CHECK(f.batching.open(make_id<TaskId>(5)) == a);
}

TEST_CASE("the tasks of the leader's key that the round left join its batch, which computes once all have their inputs", "[run][batching]") {
  Fixture f;
  f.waiting_for_inputs = make_id<TaskId>(2);
  for (std::uint32_t t = 0; t < 5; ++t) {
    const TaskRecord& r = f.trace.tasks[t];
    f.round.ready().push_back(f.ready_task(t, r.workflow, r.task));
  }
  f.round.play(f, {});
  const std::vector<TaskId> batch{make_id<TaskId>(0), make_id<TaskId>(1), make_id<TaskId>(2)};
  CHECK(f.batching.members(f.batching.batch_of(make_id<TaskId>(0))) == batch);  // max_size 3: task 4 waits
  CHECK(f.sent == std::vector<TaskId>{make_id<TaskId>(1), make_id<TaskId>(2)});
  REQUIRE(f.round.ready().size() == 2);  // the FLOP task (another key) and the one the batch had no room for
  CHECK(index(f.round.ready()[0].task) == 3);
  CHECK(index(f.round.ready()[1].task) == 4);
  REQUIRE(f.trace.decisions.size() == 3);
  CHECK(f.trace.reasons[f.trace.decisions[2].reason] == "batched with task \"decode\"");
  CHECK(f.computed.empty());  // task 2's inputs are on their way
  f.batching.member_ready(make_id<TaskId>(2), f);
  CHECK(f.computed == batch);
  // Nothing shared (shared_bytes 0) and no launch overhead in the unit operator: the members' work adds up.
  const GpuType& gpu = f.cluster.gpu_type(make_id<GpuId>(0));
  const double leader_s = f.compute.of(f.sc.workflows[0].tasks[0], gpu).total_s();
  const double summary_s = f.compute.of(f.sc.workflows[1].tasks[0], gpu).total_s();
  CHECK(summary_s == Approx(2 * leader_s));
  CHECK(f.batch_s == Approx(2 * leader_s + summary_s));
}
