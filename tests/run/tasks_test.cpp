// The task lifecycle alone, driven by hand: a two-task workflow across two nodes goes through weights,
// compute, the output held on the producer's GPU, the consumer's input over the network, and its end;
// a stopped task drops its run and is ready again after its retry.
#include <catch2/catch.hpp>

#include <map>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/network.hpp"
#include "run/tasks.hpp"

using namespace fleetsim;

namespace {

// Places each ready task on the GPU the test chose for it, if that GPU is free.
class PlaceOn : public Policy {
 public:
  explicit PlaceOn(std::map<std::uint32_t, std::uint32_t> gpu_of) : gpu_of_(std::move(gpu_of)) {}
  void schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    for (std::size_t i = 0; i < ready.size(); ++i) {
      const GpuId g = make_id<GpuId>(gpu_of_.at(index(ready[i].task)));
      if (view.is_free(g)) out.place(i, std::vector<GpuId>{g});
    }
  }

 private:
  std::map<std::uint32_t, std::uint32_t> gpu_of_;
};

// a (20 GB of weights) -> b over a 10 GB edge; one unit GPU per node, so the edge crosses the NICs.
struct Fixture {
  explicit Fixture(const std::string& faults = "{}")
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
          "workflows": {"w": {"tasks": [{"name": "a", "model": {"id": "m", "weights": "20 GB"}, "work": {"flop": "100 TFLOP"}},
                                        {"name": "b", "work": {"flop": "50 TFLOP"}}],
                              "edges": [{"from": "a", "to": "b", "bytes": "10 GB"}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}], "faults": )" + faults)),
        cluster(sc.cluster),
        topology(cluster, sc.cluster.fabric),
        network(topology.capacities()),
        flows(topology, network, queue),
        memory({100e9, 100e9}),
        occupancy(sc, cluster, trace, round_wanted),
        predicted(sc, cluster, compute),
        workload(sc, 1, predicted.job_gpu_s(), queue, trace),
        batching(sc, cluster, trace, predicted, compute, occupancy, memory, queue, round_wanted),
        round(sc, std::make_unique<PlaceOn>(std::map<std::uint32_t, std::uint32_t>{{0, 0}, {1, 1}}), cluster, occupancy, memory,
              predicted, trace, queue, true),
        tasks(sc, cluster, topology, memory, compute, flows, occupancy, predicted, workload, batching, round, queue, trace, listeners,
              round_wanted, /*restartable=*/sc.faults.max_attempts > 1) {}

  // An instance arrived: the tables grow to hold its records.
  void size_tables() {
    const run::RecordCounts n{.tasks = trace.tasks.size(), .instances = trace.instances.size()};
    occupancy.size_instances(n);
    batching.size_tasks(n);
    tasks.size_tasks(n);
  }

  // Plays events (rounds at once, when wanted) until nothing is left or `until_s` is reached.
  void run(double until_s = 1e9) {
    for (;;) {
      flows.arm();
      if (round_wanted) {
        round_wanted = false;
        round.play(tasks, listeners);
        continue;
      }
      if (queue.empty() || queue.top().time_s > until_s) return;
      const Event e = queue.pop();
      const TaskId task = make_id<TaskId>(e.subject);
      switch (run::kind_of(e)) {
        case run::kArrival: workload.arrive(e.subject, [this](std::uint32_t) { size_tables(); }, [this](TaskId id) { tasks.make_ready(id); }); break;
        case run::kComputeDone:
          if (tasks.current(run::stamp_of(e), e.subject)) tasks.on_compute_done(task);
          break;
        case run::kRetry:
          if (tasks.current(run::stamp_of(e), e.subject)) tasks.on_retry(task);
          break;
        case run::kNetwork:
          if (flows.wake(e.subject)) tasks.on_network();
          break;
        default: FAIL("unexpected event kind " << run::kind_of(e));
      }
      tasks.stop_stranded();
    }
  }
  const TaskRecord& a() const { return trace.tasks[0]; }
  const TaskRecord& b() const { return trace.tasks[1]; }

  Scenario sc;
  Cluster cluster;
  Topology topology;
  Network network;
  EventQueue queue;
  Trace trace;
  bool round_wanted = false;
  std::vector<run::RunListener*> listeners;
  run::Flows flows;
  GpuMemory memory;
  ComputeModel compute;
  run::Occupancy occupancy;
  run::Predictions predicted;
  run::Workload workload;
  run::Batching batching;
  run::PolicyRound round;
  run::Tasks tasks;
};

}  // namespace

TEST_CASE("a workflow runs through weights, compute, its edge tensor across the network, and its end", "[run][tasks]") {
  Fixture f;
  f.workload.start_open_loops();
  f.run();
  REQUIRE(f.a().status == TaskStatus::completed);
  REQUIRE(f.b().status == TaskStatus::completed);
  // a loaded its weights from host memory before computing.
  REQUIRE(f.trace.weight_loads.size() == 1);
  CHECK(f.trace.weight_loads[0].bytes == 20e9);
  CHECK(f.a().compute_start_s == Approx(f.trace.weight_loads[0].end_s));
  CHECK(f.a().end_s - f.a().compute_start_s == Approx(f.compute.of(f.sc.workflows[0].tasks[0], f.cluster.gpu_type(make_id<GpuId>(0))).total_s()));
  // b was ready when a ended, started on the other node at once, and read 10 GB over the 25 GB/s NICs.
  CHECK(f.b().ready_s == f.a().end_s);
  CHECK(f.b().start_s == f.a().end_s);
  CHECK(f.b().input_bytes == 10e9);
  CHECK(f.b().compute_start_s - f.b().start_s == Approx(10e9 / 25e9).epsilon(1e-3));
  // The tensor left a's GPU once read: only the cached weights stay.
  CHECK(f.memory.used(make_id<GpuId>(0)) == Approx(20e9));
  CHECK(f.workload.unfinished() == 0);
  CHECK(f.trace.decisions.size() == 2);  // both placements, logged
}

TEST_CASE("a stopped task drops its run, frees its GPU and is ready again after its retry", "[run][tasks]") {
  Fixture f(R"({"retry": {"max_attempts": 2, "backoff": "5 s"}})");
  f.workload.start_open_loops();
  f.run(0.5);  // a computes
  REQUIRE(f.a().status == TaskStatus::running);
  const double stopped_at = f.queue.now();  // the last event played: its weights arrived
  f.tasks.stop(make_id<TaskId>(0), "GPU n0.g0 failed");
  CHECK(f.a().status == TaskStatus::queued);
  CHECK(f.a().gpu_count == 0);
  CHECK(f.occupancy.tasks_on(0).empty());
  CHECK(f.trace.decisions.back().kind == DecisionKind::stopped);
  f.run();  // its stale compute end is skipped; the retry makes it ready 5 s later
  REQUIRE(f.a().status == TaskStatus::completed);
  CHECK(f.a().start_s == Approx(stopped_at + 5));
  CHECK(f.b().status == TaskStatus::completed);
  Summary s;
  f.tasks.summarize(s);
  CHECK(s.tasks_stopped == 1);
  CHECK(s.retries == 1);
}
