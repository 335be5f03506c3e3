// The elastic component alone, with a host that records the resizes it is asked for: waiting elastic
// tasks sized to the free GPUs, running ones grown onto idle GPUs (their own node first) or shrunk for a
// waiting task, and a round asked for when a task's min_interval has passed.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/elastic.hpp"
#include "run/events.hpp"

using namespace fleetsim;

namespace {

// Two 2-GPU nodes; "train" runs on 1 to 4 GPUs, resized at most every 5 s; "gang" needs 2.
struct Fixture : run::ElasticHost {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 2}]},
          "workflows": {"train": {"tasks": [{"name": "t", "gpus": 4, "work": {"flop": "10000 TFLOP"},
                                             "elastic": {"min_gpus": 1, "restart": "2 s", "min_interval": "5 s"}}]},
                        "gang": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "100 TFLOP"}}]}},
          "workload": [{"workflow": "train", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        memory(std::vector<double>(4, 1e12), 0),
        shared(std::vector<double>(4, SharedCompute::kExclusive)),
        occupancy(sc, cluster, trace, round_wanted),
        predicted(sc, cluster, compute),
        elastic(sc, cluster, trace, occupancy, memory, shared, predicted, queue, *this) {
    elastic.size_tasks({.tasks = 4, .instances = 4});
    occupancy.size_instances({.tasks = 4, .instances = 4});
    trace.tasks.resize(4);
    for (std::uint32_t w = 0; w < sc.workflows.size(); ++w) (sc.workflows[w].id == "train" ? train : gang) = w;
  }
  ClusterView view() const override { return occupancy.view(memory, compute, {}, queue.now()); }
  bool computing_alone(TaskId) const override { return true; }
  void resize(TaskId task, const std::vector<GpuId>& new_gang, const std::string& why) override {
    resized.push_back({task, new_gang, why});
  }
  std::string label(TaskId task) const override { return "task " + std::to_string(index(task)); }

  // Task 0, the elastic one, computing on `gpus` since `start_s`.
  void run_train(const std::vector<std::uint32_t>& gpus, double start_s) {
    TaskRecord r;
    r.workflow = train;
    r.status = TaskStatus::running;
    r.start_s = r.compute_start_s = start_s;
    r.gpu_begin = static_cast<std::uint32_t>(trace.gpus.size());
    r.gpu_count = static_cast<std::uint32_t>(gpus.size());
    for (std::uint32_t g : gpus) {
      trace.gpus.push_back(make_id<GpuId>(g));
      occupancy.add_task(g, 0);
    }
    trace.tasks[0] = r;
    elastic.task_started(make_id<TaskId>(0));
  }
  ReadyTask ready(std::uint32_t workflow, std::uint32_t gpus) const {
    ReadyTask t{};
    t.task = make_id<TaskId>(1);
    t.spec = &sc.workflows[workflow].tasks[0];
    t.gpus = gpus;
    t.model = kNoModel;
    return t;
  }

  struct Resize {
    TaskId task;
    std::vector<GpuId> gang;
    std::string why;
  };
  Scenario sc;
  std::uint32_t train = 0, gang = 0;  // workflow indices
  Cluster cluster;
  Trace trace;
  EventQueue queue;
  GpuMemory memory;
  ComputeModel compute;
  SharedCompute shared;
  bool round_wanted = false;
  run::Occupancy occupancy;
  run::Predictions predicted;
  run::Elastic elastic;
  std::vector<Resize> resized;
};

}  // namespace

TEST_CASE("a waiting elastic task asks for the GPUs free once the tasks ahead have theirs", "[run][elastic]") {
  Fixture f;
  std::vector<ReadyTask> ready{f.ready(f.gang, 2), f.ready(f.train, 4)};
  f.elastic.round_begins(ready);
  CHECK(ready[1].gpus == 2);  // 4 free, 2 of them for the gang ahead
  f.occupancy.add_task(0, 3);
  f.occupancy.add_task(1, 3);
  f.occupancy.add_task(2, 3);
  ready = {f.ready(f.gang, 2), f.ready(f.train, 4)};
  f.elastic.round_begins(ready);
  CHECK(ready[1].gpus == 1);  // never below its minimum
}

TEST_CASE("with nothing waiting a running elastic task grows onto idle GPUs, its own node first", "[run][elastic]") {
  Fixture f;
  f.run_train({2}, 0);
  f.queue.push(10, run::kSchedule, 0);
  f.queue.pop();  // now 10 s: past the min_interval
  f.elastic.round_ends({});
  REQUIRE(f.resized.size() == 1);
  CHECK(f.resized[0].gang == std::vector<GpuId>{make_id<GpuId>(2), make_id<GpuId>(3), make_id<GpuId>(0), make_id<GpuId>(1)});
  CHECK(f.resized[0].why == "grew from 1 to 4 GPUs onto free ones");
}

TEST_CASE("a running elastic task gives back GPUs for a waiting gang, after its min_interval", "[run][elastic]") {
  Fixture f;
  f.run_train({0, 1, 2, 3}, 0);
  f.occupancy.set_free_at(0, 100);
  f.occupancy.set_free_at(1, 100);
  f.occupancy.set_free_at(2, 100);
  f.occupancy.set_free_at(3, 100);
  const std::vector<ReadyTask> waiting{f.ready(f.gang, 2)};
  f.elastic.round_ends(waiting);  // at 0 s: too soon, but a round is asked for at 5 s
  CHECK(f.resized.empty());
  REQUIRE(f.queue.size() == 1);
  CHECK(f.queue.top().time_s == 5.0);
  f.queue.pop();
  f.elastic.round_ends(waiting);
  REQUIRE(f.resized.size() == 1);
  CHECK(f.resized[0].gang == std::vector<GpuId>{make_id<GpuId>(0), make_id<GpuId>(1)});  // its last members go
  CHECK(f.resized[0].why == "shrank from 4 to 2 GPUs: gave GPUs back for waiting task 1");
}
