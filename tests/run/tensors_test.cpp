// The tensors component alone: outputs held on the producer's first GPU until read, consumers ready
// once every input is produced, inputs let go when a consumer fails, and tensors lost with their GPU.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/predictions.hpp"
#include "run/tensors.hpp"

using namespace fleetsim;

namespace {

// a -> b (1 GB), a -> c (2 GB), b -> c (0.5 GB): c needs both a and b.
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
          "workflows": {"w": {"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}, {"name": "b", "work": {"flop": "1 TFLOP"}},
                                        {"name": "c", "work": {"flop": "1 TFLOP"}}],
                              "edges": [{"from": "a", "to": "b", "bytes": "1 GB"}, {"from": "a", "to": "c", "bytes": "2 GB"},
                                        {"from": "b", "to": "c", "bytes": "0.5 GB"}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        predicted(sc, cluster, compute),
        workload(sc, 1, predicted.job_gpu_s(), queue, trace),
        memory({50e9, 50e9}),
        tensors(sc, trace, workload, memory, [this](GpuId g) { freed.push_back(g); }) {
    workload.start_open_loops();
    workload.arrive(queue.pop().subject, [this](std::uint32_t) { tensors.size_tasks({.tasks = trace.tasks.size(), .instances = trace.instances.size()}); },
                    [](TaskId) {});
  }
  // The task ran on `gpu` and completed.
  void complete(std::uint32_t task, GpuId gpu) {
    TaskRecord& r = trace.tasks[task];
    r.status = TaskStatus::completed;
    r.gpu_begin = static_cast<std::uint32_t>(trace.gpus.size());
    r.gpu_count = 1;
    trace.gpus.push_back(gpu);
  }
  Scenario sc;
  Cluster cluster;
  ComputeModel compute;
  run::Predictions predicted;
  EventQueue queue;
  Trace trace;
  run::Workload workload;
  GpuMemory memory;
  std::vector<GpuId> freed;
  run::Tensors tensors;
};

const GpuId g0 = make_id<GpuId>(0), g1 = make_id<GpuId>(1);
const TaskId a = make_id<TaskId>(0), b = make_id<TaskId>(1), c = make_id<TaskId>(2);
constexpr std::uint32_t kAtoB = 0, kAtoC = 1;  // edges

}  // namespace

TEST_CASE("outputs wait on the producer's GPU and a consumer is ready once all its inputs are produced", "[run][tensors]") {
  Fixture f;
  REQUIRE(f.trace.tasks.size() == 3);
  f.complete(0, g0);
  CHECK(f.tensors.produced(a, 1) == std::vector<TaskId>{b});  // c still waits for b
  CHECK(f.memory.used(g0) == Approx(3e9));
  CHECK(f.tensors.holder(0, kAtoC) == g0);
  f.complete(1, g1);
  CHECK(f.tensors.produced(b, 2) == std::vector<TaskId>{c});
  CHECK(f.memory.used(g1) == Approx(0.5e9));
  // b read its input: g0 lets 1 GB go, once.
  f.tensors.release(0, kAtoB, 3);
  f.tensors.release(0, kAtoB, 3);
  CHECK(f.memory.used(g0) == Approx(2e9));
  CHECK(f.freed == std::vector<GpuId>{g0});
}

TEST_CASE("a consumer that fails lets go of the inputs already produced", "[run][tensors]") {
  Fixture f;
  f.complete(0, g0);
  f.tensors.produced(a, 1);
  // c fails before b ran: a's tensor for c goes; b's was never made.
  f.tensors.release_inputs(c, 2);
  CHECK(f.memory.used(g0) == Approx(1e9));  // b's input stays
  CHECK(f.freed == std::vector<GpuId>{g0});
}

TEST_CASE("a failed GPU loses its tensors: each queued consumer that had not read one is named", "[run][tensors]") {
  Fixture f;
  f.complete(0, g0);
  f.tensors.produced(a, 1);
  f.trace.tasks[1].status = TaskStatus::running;  // b has started (and read its input in place)
  std::vector<std::pair<TaskId, TaskId>> lost;
  f.tensors.lose(g0, [&](TaskId consumer, TaskId producer) { lost.emplace_back(consumer, producer); });
  CHECK(lost == std::vector<std::pair<TaskId, TaskId>>{{c, a}});
  // Nothing is held any more: a release frees nothing.
  f.tensors.release(0, kAtoC, 2);
  CHECK(f.freed.empty());
  lost.clear();
  f.tensors.lose(g1, [&](TaskId consumer, TaskId producer) { lost.emplace_back(consumer, producer); });
  CHECK(lost.empty());
}
