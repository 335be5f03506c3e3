// The policy round alone, with a scripted policy: checked decisions are carried out and logged; a
// decision that breaks a rule is a PolicyError naming the task (or GPU) and the rule.
#include <catch2/catch.hpp>

#include <functional>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/policy_round.hpp"

using namespace fleetsim;

namespace {

using Script = std::function<void(std::span<const ReadyTask>, Decisions&)>;

class ScriptedPolicy : public Policy {
 public:
  ScriptedPolicy(Script script, bool preempts) : script_(std::move(script)), preempts_(preempts) {}
  void schedule(const ClusterView&, std::span<const ReadyTask> ready, Decisions& out) override { script_(ready, out); }
  bool may_preempt() const override { return preempts_; }

 private:
  Script script_;
  bool preempts_;
};

// Two unit GPUs (50 GB of VRAM each here); tasks 0 and 1 need one GPU, task 2 two, task 3 more VRAM than a GPU has.
struct Fixture : run::RoundHost, run::RunListener {
  explicit Fixture(Script script, bool preempts = false)
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
          "workflows": {"w": {"tasks": [{"name": "one", "work": {"flop": "1 TFLOP"}},
                                        {"name": "pair", "gpus": 2, "work": {"flop": "1 TFLOP"}},
                                        {"name": "huge", "model": {"id": "m", "weights": "60 GB"}, "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        memory(std::vector<double>(2, 50e9), 0),
        occupancy(sc, cluster, trace, round_wanted),
        predicted(sc, cluster, compute),
        round(sc, std::make_unique<ScriptedPolicy>(std::move(script), preempts), cluster, occupancy, memory, predicted, trace,
              queue, /*record_decisions=*/true) {
    for (std::uint32_t local : {0u, 0u, 1u, 2u}) {
      TaskRecord r;
      r.task = local;
      trace.tasks.push_back(r);
    }
    occupancy.size_instances({.instances = 1});
    listeners.push_back(this);
  }
  void make_ready(std::uint32_t task) {
    ReadyTask t{};
    t.task = make_id<TaskId>(task);
    t.spec = &sc.workflows[0].tasks[trace.tasks[task].task];
    t.gpus = static_cast<std::uint32_t>(t.spec->gpus);
    round.ready().push_back(t);
  }

  // RoundHost: carries decisions out as the run does, in brief.
  ClusterView view() const override { return occupancy.view(memory, compute, {}, 0); }
  void start(TaskId task, std::span<const GpuId> gpus) override {
    TaskRecord& r = trace.tasks[index(task)];
    r.status = TaskStatus::running;
    r.gpu_begin = static_cast<std::uint32_t>(trace.gpus.size());
    r.gpu_count = static_cast<std::uint32_t>(gpus.size());
    for (GpuId g : gpus) {
      trace.gpus.push_back(g);
      occupancy.add_task(index(g), index(task));
    }
    started.push_back(index(task));
  }
  void fail(TaskId task, const std::string& reason) override { failed.emplace_back(index(task), reason); }
  void preempt(TaskId task, const Decisions::Preemption& how) override {
    const TaskRecord& r = trace.tasks[index(task)];
    for (std::uint32_t i = 0; i < r.gpu_count; ++i) occupancy.remove_task(index(trace.gpus[r.gpu_begin + i]), index(task));
    preempted.emplace_back(index(task), how.reason);
  }
  void fill_batch(TaskId) override {}
  // RunListener: the ready queue each round saw.
  void round_begins(std::span<ReadyTask> ready) override { seen_before.push_back(ready.size()); }
  void round_ends(std::span<const ReadyTask> ready) override { seen_after.push_back(ready.size()); }

  std::string error_of_round() {
    try {
      round.play(*this, listeners);
    } catch (const PolicyError& e) {
      return e.what();
    }
    return "";
  }

  Scenario sc;
  Cluster cluster;
  Trace trace;
  GpuMemory memory;
  ComputeModel compute;
  EventQueue queue;
  bool round_wanted = false;
  run::Occupancy occupancy;
  run::Predictions predicted;
  run::PolicyRound round;
  std::vector<run::RunListener*> listeners;
  std::vector<std::uint32_t> started;
  std::vector<std::pair<std::uint32_t, std::string>> failed, preempted;
  std::vector<std::size_t> seen_before, seen_after;
};

const GpuId g0 = make_id<GpuId>(0), g1 = make_id<GpuId>(1);

}  // namespace

TEST_CASE("a round carries out and logs the policy's checked placements and failures", "[run][round]") {
  Fixture f([](std::span<const ReadyTask>, Decisions& out) {
    out.place(1, std::vector<GpuId>{g1});
    out.fail(0, "no room");
  });
  f.make_ready(0);
  f.make_ready(1);
  f.make_ready(2);
  CHECK(f.round.play(f, f.listeners));  // placed one while task 2 still waits
  CHECK(f.started == std::vector<std::uint32_t>{1});
  REQUIRE(f.failed.size() == 1);
  CHECK(f.failed[0] == std::pair<std::uint32_t, std::string>{0, "policy \"fifo\": no room"});
  REQUIRE(f.round.ready().size() == 1);
  CHECK(index(f.round.ready()[0].task) == 2);
  CHECK(f.seen_before == std::vector<std::size_t>{3});
  CHECK(f.seen_after == std::vector<std::size_t>{1});
  REQUIRE(f.trace.decisions.size() == 2);
  CHECK(f.trace.decisions[0].kind == DecisionKind::placed);
  CHECK(f.trace.decisions[0].gpu_count == 1);
  CHECK(f.trace.decisions[1].kind == DecisionKind::failed);
  CHECK(f.trace.reasons[f.trace.decisions[1].reason] == "no room");
}

TEST_CASE("an empty ready queue is no round for the policy, but listeners hear it end", "[run][round]") {
  bool asked = false;
  Fixture f([&](std::span<const ReadyTask>, Decisions&) { asked = true; });
  CHECK_FALSE(f.round.play(f, f.listeners));
  CHECK_FALSE(asked);
  CHECK(f.seen_before.empty());
  CHECK(f.seen_after == std::vector<std::size_t>{0});
}

TEST_CASE("a placement that breaks a rule names the task and the rule", "[run][round]") {
  const std::string task = "policy \"fifo\" placed task \"one\" of workflow \"w\" (instance 0) ";
  struct Case {
    std::uint32_t ready_task;
    std::vector<GpuId> gpus;
    std::string error;
  };
  const std::vector<Case> cases{
      {0, {g0, g1}, task + "on 2 GPUs; it needs 1"},
      {0, {make_id<GpuId>(7)}, task + "on GPU 7, which does not exist"},
      {2, {g1, g1}, "policy \"fifo\" placed task \"pair\" of workflow \"w\" (instance 0) on GPU n0.g1 twice"},
      {3, {g0}, "policy \"fifo\" placed task \"huge\" of workflow \"w\" (instance 0) on GPU n0.g0, which has 50 GB of VRAM available; it needs 60 GB"},
  };
  for (const Case& c : cases) {
    Fixture f([&](std::span<const ReadyTask>, Decisions& out) { out.place(0, c.gpus); });
    f.make_ready(c.ready_task);
    CHECK(f.error_of_round() == c.error);
    CHECK(f.started.empty());
  }
  SECTION("on a busy GPU") {
    Fixture f([](std::span<const ReadyTask>, Decisions& out) {
      out.place(0, std::vector<GpuId>{g0});
      out.place(1, std::vector<GpuId>{g0});
    });
    f.make_ready(0);
    f.make_ready(1);
    CHECK(f.error_of_round() == task + "on GPU n0.g0, which is busy");
    CHECK(f.started == std::vector<std::uint32_t>{0});
  }
}

TEST_CASE("a task decided twice, or a ready index past the queue, is an error", "[run][round]") {
  Fixture twice([](std::span<const ReadyTask>, Decisions& out) {
    out.place(0, std::vector<GpuId>{g0});
    out.fail(0, "also");
  });
  twice.make_ready(0);
  CHECK(twice.error_of_round() == "policy \"fifo\" placed task \"one\" of workflow \"w\" (instance 0) twice in one round");
  Fixture past([](std::span<const ReadyTask>, Decisions& out) { out.fail(3, "x"); });
  past.make_ready(0);
  CHECK(past.error_of_round() == "policy \"fifo\" decided on ready index 3, but only 1 tasks are ready");
}

TEST_CASE("preemptions: only by a policy that declares them, of GPUs that run something", "[run][round]") {
  auto preempt_g0 = [](std::span<const ReadyTask> ready, Decisions& out) {
    if (!ready.empty() && index(ready[0].task) == 0) {
      out.place(0, std::vector<GpuId>{g0});
    } else {
      out.preempt(g0, "room for the pair");
      out.preempt(g0, "named twice");  // already freed above: skipped
    }
  };
  SECTION("a policy that declares it") {
    Fixture f(preempt_g0, /*preempts=*/true);
    f.make_ready(0);
    f.round.play(f, f.listeners);
    f.make_ready(2);
    CHECK_FALSE(f.round.play(f, f.listeners));
    REQUIRE(f.preempted.size() == 1);
    CHECK(f.preempted[0] == std::pair<std::uint32_t, std::string>{0, "room for the pair"});
    CHECK(f.trace.decisions.back().kind == DecisionKind::preempted);
  }
  SECTION("a policy that does not") {
    Fixture f(preempt_g0, /*preempts=*/false);
    f.make_ready(0);
    f.round.play(f, f.listeners);
    f.make_ready(2);
    CHECK(f.error_of_round() == "policy \"fifo\" preempted a task, but it does not declare that it may preempt");
  }
  SECTION("an idle GPU") {
    Fixture f(preempt_g0, /*preempts=*/true);
    f.make_ready(2);
    CHECK(f.error_of_round() == "policy \"fifo\" preempted GPU n0.g0, which runs nothing");
  }
}

TEST_CASE("an elastic resize is checked as a placement: its new GPUs idle, its own kept", "[run][round]") {
  Fixture f([](std::span<const ReadyTask>, Decisions& out) { out.place(0, std::vector<GpuId>{g0}); });
  f.make_ready(0);
  f.round.play(f, f.listeners);  // task 0 runs on g0
  // Task 2 (a pair) keeps g1 and would grow onto g0, which runs task 0: a bug in whoever decided it.
  const std::vector<GpuId> gang{g1, g0}, kept{g1};
  CHECK_THROWS_WITH(f.round.check_resize(make_id<TaskId>(2), gang, kept, f.view()),
                    Catch::Contains("the elastic component resized task \"pair\" of workflow \"w\" (instance 0) on GPU n0.g0, which is busy"));
  // Onto its own GPUs only: nothing to object to.
  CHECK_NOTHROW(f.round.check_resize(make_id<TaskId>(0), std::vector<GpuId>{g0}, std::vector<GpuId>{g0}, f.view()));
}
