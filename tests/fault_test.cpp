// Failures and elasticity: scripted failures give the delays worked out by hand; random ones over many seeds break no
// invariant and lose no task; bad fault specs are refused with the field named.
#include <catch2/catch.hpp>
#include <sstream>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

// One 10-s task (1000 TFLOP on a 100 TFLOP/s unit GPU) at t = 0; GPU n0.g0 fails at 4 s for 3 s.
Scenario one_task(const std::string& node, const std::string& faults) {
  return test::unit_scenario(R"("cluster": {"nodes": [{"type": ")" + node + R"(", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1000 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
      "faults": )" + faults);
}

const std::string kFailAt4 = R"("events": [{"at": "4 s", "gpu": "n0.g0", "for": "3 s"}])";

}  // namespace

TEST_CASE("a task on a failed GPU fails when it has no attempts left", "[faults]") {
  const RunResult run = simulate(one_task("unit-node-1", "{" + kFailAt4 + "}"));
  const TaskRecord& t = run.trace.tasks[0];
  CHECK(t.status == TaskStatus::failed);
  CHECK(t.end_s == Approx(4.0));
  CHECK(run.trace.reasons[t.reason] == "GPU n0.g0 failed (run 1 of 1)");
  CHECK(run.summary.gpu_failures == 1);
  CHECK(run.summary.tasks_stopped == 1);
  CHECK(run.summary.lost_gpu_s == Approx(4.0));
}

TEST_CASE("work waiting for a GPU whose repair comes after the horizon is left at the horizon, not stalled", "[faults]") {
  // One GPU, down from 1 s for 2 h; the horizon is 1 h. The tasks arriving meanwhile wait for it.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]}, "horizon": "1 h",
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "periodic", "interval": "10 s", "count": 5, "start": "5 s"}}],
      "faults": {"events": [{"at": "1 s", "gpu": "n0.g0", "for": "2 h"}]})");
  const RunResult run = simulate(sc);
  CHECK(run.summary.horizon_reached);
  CHECK_FALSE(run.summary.stalled);
  CHECK(run.summary.end_s == 3600);
  CHECK(run.summary.tasks.queued == 5);
}

TEST_CASE("a retried task waits for its backoff and a free GPU: the hand-computed delays", "[faults]") {
  const std::string retry = R"(, "retry": {"max_attempts": 2, "backoff": "1 s"}})";
  SECTION("one GPU: the retry waits for the repair at 7 s and ends at 17 s") {
    const RunResult run = simulate(one_task("unit-node-1", "{" + kFailAt4 + retry));
    const TaskRecord& t = run.trace.tasks[0];
    CHECK(t.status == TaskStatus::completed);
    CHECK(t.start_s == Approx(7.0));
    CHECK(t.end_s == Approx(17.0));
    const Summary& s = run.summary;
    CHECK(s.retries == 1);
    CHECK(s.lost_gpu_s == Approx(4.0));
    CHECK(s.availability == Approx(1 - 3.0 / 17));
    CHECK(s.goodput == Approx(10.0 / 14));
    CHECK(s.mean_recovery_s == Approx(3.0));
  }
  SECTION("two GPUs: the retry runs on the other one after the backoff, ending at 15 s") {
    const RunResult run = simulate(one_task("unit-node-2", "{" + kFailAt4 + retry));
    CHECK(run.trace.tasks[0].start_s == Approx(5.0));
    CHECK(run.trace.tasks[0].end_s == Approx(15.0));
    CHECK(run.cluster.gpu_name(run.trace.gpus[run.trace.tasks[0].gpu_begin]) == "n0.g1");
  }
  SECTION("checkpoints every 2 s keep 4 s of work; restoring costs 0.5 s: it ends at 11.5 s") {
    const RunResult run = simulate(one_task("unit-node-2", "{" + kFailAt4 + R"(, "retry": {"max_attempts": 2, "backoff": "1 s"},
        "checkpoint": {"interval": "2 s", "restore": "0.5 s"}})"));
    CHECK(run.trace.tasks[0].end_s == Approx(11.5));
    CHECK(run.summary.lost_gpu_s == Approx(0.0).margin(1e-9));
  }
  SECTION("a failure at 5 s keeps only the checkpoint at 4 s: 1 s is lost") {
    const RunResult run = simulate(one_task("unit-node-2", R"({"events": [{"at": "5 s", "gpu": "n0.g0"}],
        "retry": {"max_attempts": 2}, "checkpoint": {"interval": "2 s"}})"));
    CHECK(run.trace.tasks[0].start_s == Approx(5.0));
    CHECK(run.trace.tasks[0].end_s == Approx(11.0));
    CHECK(run.summary.lost_gpu_s == Approx(1.0));
    CHECK(run.summary.availability == Approx(1 - 6.0 / 22));  // n0.g0 down from 5 s to the end, 11 s
  }
}

TEST_CASE("a node failure stops a gang across its GPUs", "[faults]") {
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 2}]},
      "workflows": {"w": {"tasks": [{"name": "g", "gpus": 2, "work": {"flop": "1000 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
      "faults": {"events": [{"at": "2 s", "node": "n0", "for": "100 s"}], "retry": {"max_attempts": 3}})");
  const RunResult run = simulate(sc);
  const TaskRecord& t = run.trace.tasks[0];
  CHECK(run.summary.gpu_failures == 2);
  CHECK(t.status == TaskStatus::completed);
  CHECK(t.start_s == Approx(2.0));  // at once on node n1
  CHECK(t.end_s == Approx(7.0));    // 1000 TFLOP over two GPUs
  CHECK(run.cluster.gpu_name(run.trace.gpus[t.gpu_begin]) == "n1.g0");
}

TEST_CASE("tensors held on a failed GPU are lost with it, and their consumers fail", "[faults]") {
  // The 5-s task takes n0.g0; a (1 s) on n0.g1 leaves 1 GB there for b, a 2-GPU gang that must wait.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"chain": {"tasks": [{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "gpus": 2, "work": {"flop": "100 TFLOP"}}],
                              "edges": [{"from": "a", "to": "b", "bytes": "1 GB"}]},
                    "long": {"tasks": [{"name": "l", "work": {"flop": "500 TFLOP"}}]}},
      "workload": [{"workflow": "long", "arrival": {"process": "once"}}, {"workflow": "chain", "arrival": {"process": "once"}}],
      "faults": {"events": [{"at": "2 s", "gpu": "n0.g1"}]})");
  const RunResult run = simulate(sc);
  const TaskRecord* b = nullptr;
  for (const TaskRecord& t : run.trace.tasks) {
    if (run.trace.tasks.size() == 3 && t.task == 1 && t.workflow == 0) b = &t;
  }
  REQUIRE(b != nullptr);
  CHECK(b->status == TaskStatus::failed);
  CHECK(b->end_s == Approx(2.0));
  CHECK_THAT(run.trace.reasons[b->reason], Catch::Contains("input from task \"a\" was lost when GPU n0.g1 failed"));
}

// Link failures on two 1-GPU nodes, each on its own leaf, the leaves joined by two spines. a (1 s)
// runs on n0.g0; then b on n0.g0 and c on n1.g0, which first reads a's 10 GB over
// GPU>PCIe>NIC>leaf0>spine>leaf1>NIC>PCIe>GPU: four PCIe hops (2 us), two NIC hops and two spine
// hops (3 us), so 20 us of latency; each spine port gets 25 GB/s / 2 spines = 12.5 GB/s, so the
// 10 GB take 0.8 s, and c computes from 1.80002 s to 2.80002 s.
namespace {

Scenario two_leaves(const std::string& b_flop, const std::string& faults) {
  return test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}],
                                "fabric": {"topology": "fat-tree", "nodes_per_leaf": 1, "spines": 2}},
      "workflows": {"w": {"tasks": [{"name": "a", "work": {"flop": "100 TFLOP"}}, {"name": "b", "work": {"flop": ")" + b_flop + R"("}},
                                    {"name": "c", "work": {"flop": "100 TFLOP"}}],
                          "edges": [{"from": "a", "to": "b"}, {"from": "a", "to": "c", "bytes": "10 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
      "faults": )" + faults);
}

const TaskRecord& task_named(const RunResult& run, const Scenario& sc, const std::string& name) {
  for (const TaskRecord& t : run.trace.tasks) {
    if (sc.workflows[t.workflow].tasks[t.task].name == name) return t;
  }
  FAIL("no task " << name);
  throw;
}

double bytes_on(const RunResult& run, const std::string& link) {
  return run.link_bytes[*run.topology.find_link(link)];
}

}  // namespace

TEST_CASE("a transfer whose spine link fails mid-way goes on over the other spine", "[faults][network]") {
  // Which spine a's 10 GB take is ECMP's choice: a run without failures shows it.
  const Scenario calm = two_leaves("100 TFLOP", "{}");
  const RunResult before = simulate(calm);
  REQUIRE(task_named(before, calm, "c").compute_start_s == Approx(1.80002).epsilon(1e-12));
  const bool via0 = bytes_on(before, "leaf0>spine0") > 0;
  const std::string used = via0 ? "0" : "1", other = via0 ? "1" : "0";
  REQUIRE(bytes_on(before, "leaf0>spine" + used) == Approx(10e9));

  // The used spine's cable fails at 1.4 s (named from the spine's side: a cable fails both ways). By
  // then 0.4 s * 12.5 GB/s = 5 GB have crossed it; the other 5 GB go over the other spine at the same
  // 12.5 GB/s: the last byte leaves at 1.8 s, and delivery pays the new route's 20 us twice (the
  // reconnect, then the route): c computes from 1.80004 s and ends at 2.80004 s.
  const Scenario sc = two_leaves("100 TFLOP", R"({"events": [{"at": "1.4 s", "link": "spine)" + used + R"(>leaf0", "for": "10 s"}]})");
  const RunResult run = simulate(sc);
  const TaskRecord& c = task_named(run, sc, "c");
  CHECK(c.status == TaskStatus::completed);
  CHECK(c.compute_start_s == Approx(1.80004).epsilon(1e-12));
  CHECK(c.end_s == Approx(2.80004).epsilon(1e-12));
  CHECK(bytes_on(run, "leaf0>spine" + used) == Approx(5e9));
  CHECK(bytes_on(run, "leaf0>spine" + other) == Approx(5e9));
  CHECK(bytes_on(run, "spine" + other + ">leaf1") == Approx(5e9));
  CHECK(run.summary.link_failures == 1);
  CHECK(run.summary.flows_rerouted == 1);
  CHECK(run.summary.tasks_stopped == 0);
  CHECK(run.summary.gpu_failures == 0);
  CHECK(run.summary.availability == 1);  // GPU availability: no GPU went down
  std::ostringstream text;
  write_summary_text(text, sc, run.summary);
  CHECK_THAT(text.str(), Catch::Contains("links      1 link failures; 1 flows rerouted around them; 0 tasks stopped (0 retried)"));
  CHECK_THAT(summary_json(run.summary), Catch::Contains("\"flows_rerouted\": 1") && Catch::Contains("\"link_failures\": 1"));
}

TEST_CASE("a transfer with no route left stops its task, which runs again after the repair", "[faults][network]") {
  // Node n1 has one NIC: when its cable to leaf1 fails at 1.4 s, nothing reaches n1.g0. b takes 3 s
  // here (1 s to 4 s), so the retry has only n1.g0.
  const std::string cut = R"("events": [{"at": "1.4 s", "link": "leaf1>n1.nic0", "for": "1 s"}])";
  SECTION("retried after a 2-s backoff, at 3.4 s, with the cable back since 2.4 s: c ends at 5.20002 s") {
    const Scenario sc = two_leaves("300 TFLOP", "{" + cut + R"(, "retry": {"max_attempts": 2, "backoff": "2 s"}})");
    const RunResult run = simulate(sc);
    const TaskRecord& c = task_named(run, sc, "c");
    CHECK(c.status == TaskStatus::completed);
    CHECK(run.cluster.gpu_name(run.trace.gpus[c.gpu_begin]) == "n1.g0");
    CHECK(c.start_s == Approx(3.4));
    // 10 GB again from the start at 12.5 GB/s, plus 20 us: compute from 4.20002 s to 5.20002 s.
    CHECK(c.end_s == Approx(5.20002).epsilon(1e-12));
    CHECK(run.summary.makespan_s == Approx(5.20002).epsilon(1e-12));
    CHECK(run.summary.tasks_stopped == 1);
    CHECK(run.summary.retries == 1);
    CHECK(run.summary.lost_gpu_s == Approx(0.4));  // c held n1.g0 from 1 s to 1.4 s
    CHECK(run.summary.link_failures == 1);
    CHECK(run.summary.flows_rerouted == 0);
    // The cable carried 0.4 s * 12.5 GB/s = 5 GB of the first try, then the whole 10 GB.
    CHECK(bytes_on(run, "leaf1>n1.nic0") == Approx(15e9));
  }
  SECTION("no attempts left: c fails with the link named") {
    const Scenario sc = two_leaves("300 TFLOP", "{" + cut + "}");
    const RunResult run = simulate(sc);
    const TaskRecord& c = task_named(run, sc, "c");
    CHECK(c.status == TaskStatus::failed);
    CHECK(c.end_s == Approx(1.4));
    CHECK(run.trace.reasons[c.reason] == "link leaf1>n1.nic0 failed: no route left from n0.g0 to n1.g0 (run 1 of 1)");
  }
  SECTION("retried at once while the cable is still down: the new transfer has no route, and c fails on its second run") {
    const Scenario sc = two_leaves("300 TFLOP", "{" + cut + R"(, "retry": {"max_attempts": 2}})");
    const RunResult run = simulate(sc);
    const TaskRecord& c = task_named(run, sc, "c");
    CHECK(c.status == TaskStatus::failed);
    CHECK(c.end_s == Approx(1.4));
    CHECK(run.trace.reasons[c.reason] == "link failures left no route from n0.g0 to n1.g0 (run 2 of 2)");
    CHECK(run.summary.tasks_stopped == 2);
  }
}

TEST_CASE("random link failures give the same run for the same seed, and a different one for another", "[faults][network][determinism]") {
  const std::vector<ScenarioEdit> edits{{"/faults", R"({"link": {"mtbf": "1 min", "mttr": "2 s"}, "retry": {"max_attempts": 3, "backoff": "1 s"}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/llm-training.json", edits);
  const RunResult one = simulate(sc, {.seed = 5});
  CHECK(one.summary.link_failures > 0);
  CHECK(summary_json(one.summary) == summary_json(simulate(sc, {.seed = 5}).summary));
  CHECK(summary_json(one.summary) != summary_json(simulate(sc, {.seed = 6}).summary));
}

TEST_CASE("random failures over 200 seeds break no invariant and lose no task", "[faults][property]") {
  // The LLM training scenario (gangs, collectives, cross-node transfers) with a GPU failing every
  // 5 min, a node every 30 min and a cable every 2 min on average (a run lasts about 8 s), three
  // attempts per task and checkpoints.
  const std::vector<ScenarioEdit> edits{
      {"/faults", R"({"gpu": {"mtbf": "5 min", "mttr": "1 s"}, "node": {"mtbf": "30 min", "mttr": "5 s"},
                      "link": {"mtbf": "2 min", "mttr": "1 s"},
                      "retry": {"max_attempts": 3, "backoff": "30 s"}, "checkpoint": {"interval": "20 s", "restore": "5 s"}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/llm-training.json", edits);
  std::uint64_t stopped = 0, failed = 0, link_failures = 0, rerouted = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const Summary s = simulate(sc, {.seed = seed}).summary;  // the invariants are checked inside
    CHECK(s.tasks.completed + s.tasks.failed + s.tasks.running + s.tasks.queued == s.tasks.submitted);
    CHECK(s.availability >= 0);
    CHECK(s.availability <= 1);
    CHECK(s.goodput <= 1);
    stopped += s.tasks_stopped;
    failed += s.tasks.failed;
    link_failures += s.link_failures;
    rerouted += s.flows_rerouted;
  }
  CHECK(stopped > 0);  // the failures did hit running tasks
  CHECK(link_failures > 0);
  CHECK(rerouted > 0);  // and cables failed under flows
  INFO("tasks stopped " << stopped << ", failed for good " << failed);
}

TEST_CASE("a run with failures is the same for the same seed", "[faults]") {
  const std::vector<ScenarioEdit> edits{{"/faults", R"({"gpu": {"mtbf": "1 h", "mttr": "5 min"}, "retry": {"max_attempts": 2}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/default.json", edits);
  CHECK(summary_json(simulate(sc, {.seed = 9}).summary) == summary_json(simulate(sc, {.seed = 9}).summary));
}

TEST_CASE("malformed fault specs are refused with the field named", "[faults]") {
  const auto error = [](const std::string& faults) {
    try {
      one_task("unit-node-1", faults);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"({"events": [{"at": "1 s", "gpu": "n0.g0"}]})").empty());
  CHECK_THAT(error(R"({"events": [{"at": "1 s", "gpu": "n0.g7"}]})"), Catch::Contains("/faults/events/0/gpu: no GPU \"n0.g7\""));
  CHECK_THAT(error(R"({"events": [{"at": "1 s", "gpu": "n0.g0", "node": "n0"}]})"), Catch::Contains("expected exactly one of"));
  CHECK_THAT(error(R"({"events": [{"gpu": "n0.g0"}]})"), Catch::Contains("/faults/events/0/at"));
  CHECK_THAT(error(R"({"gpu": {"mttr": "1 h"}})"), Catch::Contains("/faults/gpu/mtbf"));
  CHECK_THAT(error(R"({"retry": {"max_attempts": 0}})"), Catch::Contains("/faults/retry/max_attempts"));
  CHECK_THAT(error(R"({"checkpoint": {"restore": "1 s"}})"), Catch::Contains("/faults/checkpoint/interval"));
  CHECK_THAT(error(R"({"chaos": true})"), Catch::Contains("/faults/chaos"));
  CHECK(error(R"({"events": [{"at": "1 s", "link": "switch>n0.nic0"}]})").empty());
  CHECK(error(R"({"events": [{"at": "1 s", "link": "n0.nic0>switch", "for": "2 s"}], "link": {"mtbf": "1 h", "mttr": "1 min"}})").empty());
  CHECK_THAT(error(R"({"events": [{"at": "1 s", "link": "leaf0>spine0"}]})"), Catch::Contains("/faults/events/0/link: no link \"leaf0>spine0\""));
  CHECK_THAT(error(R"({"events": [{"at": "1 s", "link": "n0.g0>n0.pcie0"}]})"), Catch::Contains("/faults/events/0/link: expected a NIC or fabric link"));
  CHECK_THAT(error(R"({"events": [{"at": "1 s", "link": "n0.nic0>switch", "gpu": "n0.g0"}]})"), Catch::Contains("expected exactly one of"));
  CHECK_THAT(error(R"({"link": {"mtbf": "0 s", "mttr": "1 s"}})"), Catch::Contains("/faults/link/mtbf: expected a positive time"));
  CHECK_THAT(error(R"({"link": {"mtbf": "1 h"}})"), Catch::Contains("/faults/link/mttr"));
}

// Autoscaling: nodes come up after their provisioning delay, drain without stopping work, follow a
// schedule, and only nodes on are billed.
namespace {

Scenario elastic(const std::string& workload, const std::string& autoscale, int nodes = 3) {
  return test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": )" + std::to_string(nodes) + R"(}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "10000 TFLOP"}}]}},
      "workload": )" + workload + R"(, "autoscale": )" + autoscale);
}

}  // namespace

TEST_CASE("an autoscaler brings nodes up after their provisioning delay and bills them from the decision", "[autoscale]") {
  // Three 100-s tasks at 0 on one node of three: at 10 s the utilization policy wants 3 nodes; two
  // are provisioned for 5 s and take the waiting tasks at 15 s.
  const RunResult run = simulate(elastic(R"([{"workflow": "w", "arrival": {"process": "once", "count": 3}}])",
                                         R"({"policy": "utilization", "target_utilization": 1, "interval": "10 s", "provisioning": "5 s"})"));
  std::vector<double> starts;
  for (const TaskRecord& t : run.trace.tasks) starts.push_back(t.start_s);
  std::sort(starts.begin(), starts.end());
  CHECK(starts == std::vector<double>{0, 15, 15});
  CHECK(run.summary.makespan_s == Approx(115));
  CHECK(run.summary.nodes_started == 2);
  // Node 0 for 115 s, nodes 1 and 2 from the decision at 10 s: 325 node-seconds at $1 per GPU-hour.
  CHECK(run.summary.node_s_on == Approx(325));
  CHECK(run.summary.cost_usd == Approx(325.0 / 3600));

  // The billing rate over time: $1/h from 0 (one 1-GPU node), $3/h from the decision at 10 s, and the
  // rate integrated to the end is the summary's cost.
  const RunResult recorded = simulate(elastic(R"([{"workflow": "w", "arrival": {"process": "once", "count": 3}}])",
                                              R"({"policy": "utilization", "target_utilization": 1, "interval": "10 s", "provisioning": "5 s"})"),
                                      {.record_link_samples = true});
  REQUIRE(recorded.cost_samples.size() >= 2);
  CHECK(recorded.cost_samples[0].time_s == 0);
  CHECK(recorded.cost_samples[0].usd_per_hour == Approx(1));
  CHECK(recorded.cost_samples[1].time_s == Approx(10));
  CHECK(recorded.cost_samples[1].usd_per_hour == Approx(3));
  double usd = 0;
  for (std::size_t i = 0; i < recorded.cost_samples.size(); ++i) {
    const double until = i + 1 < recorded.cost_samples.size() ? recorded.cost_samples[i + 1].time_s : recorded.summary.end_s;
    usd += recorded.cost_samples[i].usd_per_hour * (until - recorded.cost_samples[i].time_s) / 3600;
  }
  CHECK(usd == Approx(recorded.summary.cost_usd).epsilon(1e-12));
}

TEST_CASE("scaling in drains a node: its task runs to the end before the node goes off", "[autoscale]") {
  // A 100-s task on each of two nodes at 0, one more at 150 s. After both end, the queue policy
  // with an empty queue turns a node off; the third task runs on the node left.
  const RunResult run = simulate(elastic(R"([{"workflow": "w", "arrival": {"process": "times", "times": ["0 s", "0 s", "150 s"]}}])",
                                         R"({"policy": "queue", "target_wait": "1 min", "initial_nodes": 2, "interval": "20 s", "scale_in_window": "0 s"})",
                                         2));
  CHECK(run.summary.tasks.completed == 3);
  CHECK(run.summary.nodes_stopped >= 1);
  CHECK(run.summary.makespan_s == Approx(250));
  // The decision at 100 s comes just after both tasks ended (they were queued first): one node goes
  // off then, the other stays on to the end.
  CHECK(run.summary.node_s_on == Approx(250 + 100));
}

TEST_CASE("a scheduled autoscaler follows its table", "[autoscale]") {
  // One node until 50 s, then two: the second task waits for it.
  const RunResult run = simulate(elastic(R"([{"workflow": "w", "arrival": {"process": "once", "count": 2}}])",
                                         R"({"policy": "schedule", "schedule": [{"at": "0 s", "nodes": 1}, {"at": "50 s", "nodes": 2}],
                                             "interval": "10 s", "period": "1000 s"})",
                                         2));
  std::vector<double> starts;
  for (const TaskRecord& t : run.trace.tasks) starts.push_back(t.start_s);
  std::sort(starts.begin(), starts.end());
  CHECK(starts == std::vector<double>{0, 50});
}

TEST_CASE("malformed autoscaler specs are refused with the field named", "[autoscale]") {
  const auto error = [](const std::string& autoscale) {
    try {
      elastic(R"([{"workflow": "w", "arrival": {"process": "once"}}])", autoscale);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"({"policy": "utilization", "target_utilization": 0.7})").empty());
  CHECK_THAT(error(R"({"policy": "magic"})"), Catch::Contains("/autoscale/policy"));
  CHECK_THAT(error(R"({"policy": "schedule"})"), Catch::Contains("/autoscale/schedule"));
  CHECK_THAT(error(R"({"policy": "queue"})"), Catch::Contains("/autoscale/target_wait"));
  CHECK_THAT(error(R"({"policy": "utilization", "target_utilization": 0.7, "min_nodes": 9})"), Catch::Contains("/autoscale/min_nodes"));
}

TEST_CASE("nodes that are off draw no idle power", "[autoscale]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/elastic-studio.json", std::vector<ScenarioEdit>{{"/horizon", "\"30 min\""}});
  const Summary s = simulate(sc).summary;
  const GpuType& h100 = *Catalog::builtin().gpu("h100-sxm");
  REQUIRE(h100.idle_power_w > 0);
  REQUIRE(s.node_s_on < 4 * s.end_s);  // some node was off some of the time
  // Busy GPU-time at TDP, the rest of the time the nodes were on at idle power.
  CHECK(s.energy_j == Approx(s.gpu_busy_s * h100.tdp_w + (8 * s.node_s_on - s.gpu_busy_s) * h100.idle_power_w).epsilon(1e-9));
}

TEST_CASE("autoscaling and random failures together break no invariant over 40 seeds", "[autoscale][faults][property]") {
  const std::vector<ScenarioEdit> edits{
      {"/horizon", "\"20 min\""},
      {"/faults", R"({"gpu": {"mtbf": "30 min", "mttr": "2 min"}, "node": {"mtbf": "2 h", "mttr": "5 min"}, "retry": {"max_attempts": 2, "backoff": "5 s"}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/elastic-studio.json", edits);
  std::uint64_t started = 0, failures = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const Summary s = simulate(sc, {.seed = seed}).summary;
    CHECK(s.tasks.completed + s.tasks.failed + s.tasks.running + s.tasks.queued == s.tasks.submitted);
    CHECK(s.node_s_on <= 4 * s.end_s + 1e-6);
    started += s.nodes_started;
    failures += s.gpu_failures;
  }
  CHECK(started > 0);
  CHECK(failures > 0);
}

TEST_CASE("spot nodes cost their price factor and their preemptions stop tasks like failures", "[spot][faults]") {
  // Two unit nodes, the second spot at a quarter of the price, preempted too rarely to matter: two
  // 100-s tasks cost 100 s of one full-price and one quarter-price GPU.
  const Scenario calm = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 2}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "10000 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 2}}],
      "spot": {"nodes": 1, "price_factor": 0.25, "mtbp": "100000 h", "restock": "10 min"})");
  const Summary s = simulate(calm).summary;
  CHECK(s.makespan_s == Approx(100));
  CHECK(s.cost_usd == Approx(100.0 / 3600 * 1.25));
  CHECK(s.spot_preemptions == 0);

  // The LLM training scenario with half its nodes spot, preempted every 20 s on average: tasks are
  // stopped and retried, preemptions are not counted as failures, and every invariant holds.
  const std::vector<ScenarioEdit> edits{
      {"/spot", R"({"nodes": 2, "price_factor": 0.4, "mtbp": "20 s", "restock": "5 s"})"},
      {"/faults", R"({"retry": {"max_attempts": 4, "backoff": "1 s"}})"}};
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/llm-training.json", edits);
  std::uint64_t preemptions = 0, stopped = 0;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const RunResult run = simulate(sc, {.seed = seed});
    CHECK(run.summary.gpu_failures == 0);
    preemptions += run.summary.spot_preemptions;
    stopped += run.summary.tasks_stopped;
    for (const TaskRecord& t : run.trace.tasks) {
      if (t.status == TaskStatus::failed) CHECK_THAT(run.trace.reasons[t.reason], Catch::Contains("was preempted") || Catch::Contains("input from task"));
    }
  }
  CHECK(preemptions > 0);
  CHECK(stopped > 0);
}

TEST_CASE("malformed spot specs are refused with the field named", "[spot]") {
  const auto error = [](const std::string& spot) {
    try {
      one_task("unit-node-2", R"({}, "spot": )" + spot);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"({"nodes": 1, "price_factor": 0.3, "mtbp": "1 h", "restock": "1 min"})").empty());
  CHECK_THAT(error(R"({"nodes": 2, "price_factor": 0.3, "mtbp": "1 h", "restock": "1 min"})"), Catch::Contains("/spot/nodes"));
  CHECK_THAT(error(R"({"nodes": 1, "price_factor": 1.3, "mtbp": "1 h", "restock": "1 min"})"), Catch::Contains("/spot/price_factor"));
  CHECK_THAT(error(R"({"nodes": 1, "price_factor": 0.3, "restock": "1 min"})"), Catch::Contains("/spot/mtbp"));
}
