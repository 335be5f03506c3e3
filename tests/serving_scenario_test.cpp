// Serving deployments inside a scenario: alone they serve exactly what `serve` serves on the same
// deployment and seed; beside workflows their replicas hold their GPUs (no task ever runs there) and
// the workflows' and serving's SLOs are judged together; requests unfinished at the horizon count in
// the verdicts at their wait so far; placements that cannot be made, and features serving does not
// yet run beside, are refused with the field.
#include <catch2/catch.hpp>
#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "fleetsim/error.hpp"
#include "fleetsim/plan.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"
#include "serving/replica_set.hpp"

using namespace fleetsim;

namespace {

// The GPUs the run's tasks ran on.
std::set<std::uint32_t> gpus_used(const RunResult& run) {
  std::set<std::uint32_t> used;
  for (const TaskRecord& t : run.trace.tasks) {
    for (std::uint32_t k = t.gpu_begin; k < t.gpu_begin + t.gpu_count; ++k) used.insert(index(run.trace.gpus[k]));
  }
  return used;
}

// An autoscaled run served every request, added `ups` replicas and drained them all after.
void check_scaled(const ServingResult& r, std::uint64_t completed, std::uint64_t ups) {
  CHECK(r.completed == completed);
  CHECK(r.scaled.ups == ups);
  CHECK(r.scaled.ups_without_gpus == 0);
  CHECK(r.scaled.downs == ups);
}

const std::string kChat = R"({"name": "chat", "model": "llama-3-8b", "tp": 1, "replicas": 1,
    "requests": {"rate": "20 /s", "count": 400, "prompt_tokens": {"uniform": [256, 1024]}, "output_tokens": {"uniform": [16, 128]}},
    "slos": [{"metric": "ttft", "percentile": 95, "target": "1 s"}, {"metric": "tpot", "percentile": 95, "target": "50 ms"}]})";

std::string scenario(const std::string& serving, const std::string& rest = "", const std::string& nodes = R"([{"type": "hgx-h100-8", "count": 1}])") {
  return R"({"name": "s", "seed": 3, "cluster": {"nodes": )" + nodes + R"(}, "serving": [)" + serving + "]" + rest + "}";
}

// Two-GPU gangs of Llama 3 8B steps, enough of them to want every GPU of the node.
const std::string kWorkflows = R"(, "workflows": {"steps": {"name": "steps", "tasks": [
    {"name": "a", "gpus": 2, "model": "llama-3-8b", "working_set": "4 GB", "work": {"architecture": "llama-3-8b", "tokens": 4096}}]}},
  "workload": [{"workflow": "steps", "arrival": {"process": "once", "count": 64}}],
  "slos": [{"metric": "latency_p95", "target": "1 h"}])";

// A light Llama 3 8B deployment at TP 4 on nodes of one type.
std::string light_on(const std::string& name, const std::string& type) {
  return R"({"name": ")" + name + R"(", "model": "llama-3-8b", "tp": 4, "nodes": ")" + type +
         R"(", "requests": {"rate": "1 /s", "count": 50, "prompt_tokens": 256, "output_tokens": 32}})";
}
// A TP 8 chat deployment on HGX A100s, autoscaled from one replica to two under a burst.
const std::string kA100Chat = R"({"name": "chat", "model": "llama-3-8b", "tp": 8, "nodes": "hgx-a100-8", "router": "least-tokens", "autoscale": {"min": 1, "max": 2, "interval": "10 s"},
    "requests": {"rate": "100 /s", "count": 6000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";

// An autoscaled deployment of a scenario on one HGX H100, its engine driven by hand (no autoscaler, no
// faults: the test adds, drains and fails replicas itself); `drained`: each replica parked, and when.
struct HandDriven {
  explicit HandDriven(const std::string& deployment)
      : sc(parse_scenario(scenario(deployment), "s.json", ".")), set(*sc.serving[0], serving::make_requests(*sc.serving[0], 1, 0), queue, names) {
    set.on_drained([this](std::uint32_t lane) { drained.emplace_back(lane, queue.now()); });
    set.start();
  }
  void run_until(double t) {
    while (!queue.empty() && queue.top().time_s <= t) {
      const Event e = queue.pop();
      if (e.kind == names.arrival_kind) {
        set.arrive();
      } else {
        set.iteration_done(e.subject, e.kind >> 8);
      }
    }
  }
  Scenario sc;
  EventQueue queue;
  serving::EventNames names{.arrival_kind = 0, .iteration_kind = 1, .transfer_kind = 2, .arrival_subject = 0, .first_replica_subject = 0};
  serving::ReplicaSet set;
  std::vector<std::pair<std::uint32_t, double>> drained;
};

// A scenario's node autoscaler (utilization, 10 s decisions, 30 s to start a node), `on` nodes on at the start.
std::string node_autoscaler(int on) {
  return R"(, "autoscale": {"policy": "utilization", "target_utilization": 0.7, "min_nodes": 0, "initial_nodes": )" + std::to_string(on) +
         R"(, "interval": "10 s", "provisioning": "30 s", "scale_in_window": "0 s"})";
}

std::string error_of(const std::string& json) {
  try {
    parse_scenario(json, "s.json", ".");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a scenario of one serving deployment serves exactly what serve serves on the same deployment and seed", "[serving][scenario]") {
  const Scenario sc = parse_scenario(scenario(kChat), "s.json", ".");
  const RunResult run = simulate(sc);
  REQUIRE(run.summary.serving.size() == 1);
  const ServingResult& in_run = run.summary.serving.front();
  // The same deployment as a file of its own, drawn from the same seed (the run's, stream 0).
  const ServingDeployment alone = parse_serving(R"({"name": "chat", "seed": 3, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-8b",
      "tp": 1, "replicas": 1, "requests": {"rate": "20 /s", "count": 400, "prompt_tokens": {"uniform": [256, 1024]}, "output_tokens": {"uniform": [16, 128]}},
      "slos": [{"metric": "ttft", "percentile": 95, "target": "1 s"}, {"metric": "tpot", "percentile": 95, "target": "50 ms"}]})",
                                                "chat.json");
  const ServingResult served = simulate_serving(alone);
  CHECK(in_run.completed == 400);
  CHECK(in_run.iterations == served.iterations);
  CHECK(in_run.ttft_s.p95 == served.ttft_s.p95);
  CHECK(in_run.tpot_s.p99 == served.tpot_s.p99);
  CHECK(in_run.e2e_s.max == served.e2e_s.max);
  CHECK(run.summary.makespan_s == Approx(served.last_finish_s).epsilon(1e-12));
  // One GPU of eight computed, for the iterations' summed time.
  CHECK(run.summary.gpu_busy_s == Approx(served.busy.total_s).epsilon(1e-12));
  CHECK(run.summary.gpu_utilization == Approx(served.busy.total_s / (8 * run.summary.end_s)).epsilon(1e-12));
  // Its SLOs stand beside the workflows' (none here), named by the deployment.
  REQUIRE(run.summary.slos.size() == 2);
  CHECK(run.summary.slos[0].deployment == "chat");
  CHECK(run.summary.slos[0].metric == "ttft_p95");
  CHECK(run.summary.slos[0].actual == served.verdicts[0].achieved_s);
  // Same seed, same run; another seed, other requests.
  CHECK(summary_json(simulate(sc).summary) == summary_json(run.summary));
  CHECK(summary_json(simulate(sc, {.seed = 4}).summary) != summary_json(run.summary));
}

TEST_CASE("serving replicas hold their GPUs: no task runs there, and the workflows wait for the GPUs left", "[serving][scenario]") {
  // A TP-2 replica and a TP-1 replica take GPUs 0-1 and 2 of the node, first fit in order.
  const std::string two = R"({"name": "big", "model": "llama-3-8b", "tp": 2, "requests": {"rate": "5 /s", "count": 50, "prompt_tokens": 512, "output_tokens": 32}},
                             {"name": "small", "model": "llama-3-8b", "requests": {"rate": "5 /s", "count": 50, "prompt_tokens": 512, "output_tokens": 32}})";
  const Scenario sc = parse_scenario(scenario(two, kWorkflows), "s.json", ".");
  REQUIRE(sc.serving.size() == 2);
  CHECK(sc.serving[0]->placement.size() == 1);
  CHECK(sc.serving[0]->placement[0].first_gpu == 0);
  CHECK(sc.serving[1]->placement[0].first_gpu == 2);
  const RunResult run = simulate(sc);
  std::set<std::uint32_t> used;
  for (const TaskRecord& t : run.trace.tasks) {
    REQUIRE(t.status == TaskStatus::completed);
    for (std::uint32_t k = t.gpu_begin; k < t.gpu_begin + t.gpu_count; ++k) used.insert(index(run.trace.gpus[k]));
  }
  REQUIRE_FALSE(used.empty());
  CHECK(*used.begin() >= 3);  // never GPUs 0-2
  // Without the deployments the same tasks spread over all eight GPUs and finish sooner.
  Scenario without = sc;
  without.serving.clear();
  const RunResult alone = simulate(without);
  CHECK(alone.summary.latency_s.p95 < run.summary.latency_s.p95);
  REQUIRE(run.summary.slos.size() == 1);  // the workflows' SLO; the deployments set none
  CHECK(run.summary.serving.size() == 2);
  CHECK(run.summary.serving[1].completed == 50);
}

TEST_CASE("requests unfinished at the horizon count in the verdicts at their wait so far", "[serving][scenario]") {
  // 200 long prompts at once on one replica, stopped after 2 s: most are still waiting.
  const std::string flood = R"({"name": "flood", "model": "llama-3-8b", "requests": {"count": 200, "prompt_tokens": 4096, "output_tokens": 256},
                               "slos": [{"metric": "ttft", "percentile": 50, "target": "1 s"}]})";
  const RunResult run = simulate(parse_scenario(scenario(flood, R"(, "horizon": "2 s")"), "s.json", "."));
  const ServingResult& r = run.summary.serving.front();
  CHECK(run.summary.horizon_reached);
  CHECK(r.requests == 200);
  CHECK(r.completed < 200);
  // The completed alone would look fine at the median; with the waiting ones counted it misses.
  REQUIRE(r.verdicts.size() == 1);
  CHECK_FALSE(r.verdicts[0].met);
  CHECK(r.verdicts[0].achieved_s > r.ttft_s.p50);
  std::ostringstream text;
  write_summary_text(text, parse_scenario(scenario(flood, R"(, "horizon": "2 s")"), "s.json", "."), run.summary);
  CHECK_THAT(text.str(), Catch::Contains("had not completed when the run stopped") && Catch::Contains("MISSED flood (serving) ttft_p50"));
}

TEST_CASE("serving deployments in a scenario are refused with the field where they cannot be placed or run", "[serving][scenario]") {
  // A TP group over nodes takes whole nodes: TP 14 (of Qwen2's 28 heads) on 8-GPU nodes is refused; TP 16
  // wants two nodes, which one node does not have.
  const std::string tp14 = R"({"model": "qwen2-7b", "tp": 14, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(tp14)), Catch::Contains("/serving/0/tp") && Catch::Contains("at most the 8 GPUs of a hgx-h100-8 node, or a multiple of them (whole nodes), found 14"));
  const std::string tp16 = R"({"model": "llama-3-8b", "tp": 16, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(tp16)), Catch::Contains("/serving/0/replicas") && Catch::Contains("0 of the 1 replicas of TP 16 found room"));
  // Autoscaled, its first replica must fit as a fixed one's would.
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "tp": 16, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}, "autoscale": {"min": 1, "max": 2}})")),
             Catch::Contains("/serving/0/replicas") && Catch::Contains("0 of the 1 replicas of TP 16 found room"));
  // Five TP-2 replicas on 8 GPUs: four fit.
  const std::string five = R"({"model": "llama-3-8b", "tp": 2, "replicas": 5, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(five)), Catch::Contains("/serving/0/replicas") && Catch::Contains("4 of the 5 replicas of TP 2 found room"));
  // What the first deployment took is not free for the second.
  const std::string six = R"({"model": "llama-3-8b", "tp": 1, "replicas": 6, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}},
                            {"name": "b", "model": "llama-3-8b", "tp": 4, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(six)), Catch::Contains("/serving/1/replicas") && Catch::Contains("0 of the 1 replicas of TP 4"));
  const std::string with_cluster = R"({"model": "llama-3-8b", "cluster": {}, "seed": 2, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(with_cluster)), Catch::Contains("/serving/0/cluster") && Catch::Contains("/serving/0/seed"));
  const std::string two_groups = R"([{"type": "hgx-h100-8", "count": 1}, {"type": "hgx-a100-8", "count": 1}])";
  const std::string unnamed = R"({"model": "llama-3-8b", "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(unnamed, "", two_groups)), Catch::Contains("/serving/0/nodes"));
  const std::string wrong = R"({"model": "llama-3-8b", "nodes": "dgx-b200", "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(wrong, "", two_groups)), Catch::Contains("expected a node type of the cluster (hgx-h100-8, hgx-a100-8)"));
  const std::string named = R"({"model": "llama-3-8b", "nodes": "hgx-a100-8", "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  const Scenario on_a100 = parse_scenario(scenario(named, "", two_groups), "s.json", ".");
  CHECK(on_a100.serving[0]->placement[0].node == 1);
  CHECK(on_a100.serving[0]->cluster.groups.front().gpu.id == "a100-sxm-80gb");
  CHECK_THAT(error_of(scenario("")), Catch::Contains("/serving") && Catch::Contains("non-empty array"));
  // A gang larger than the GPUs the replicas leave can never run: said before the run.
  const std::string eight_gang = R"(, "workflows": {"w": {"name": "w", "tasks": [{"name": "a", "gpus": 8, "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 1}}])";
  CHECK_THAT(error_of(scenario(unnamed, eight_gang)), Catch::Contains("needs a gang of 8 GPUs") && Catch::Contains("1 of them held by serving replicas"));
  const std::string a = R"({"name": "a", "model": "llama-3-8b", "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(a + ", " + a)), Catch::Contains("/serving/1/name") && Catch::Contains("no other deployment has"));
  const std::string staged = R"({"model": "llama-3-8b", "tp": 2, "pp": 2, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}, "autoscale": {"min": 1, "max": 2}})";
  CHECK(error_of(scenario(staged)).empty());  // a pipeline's lanes autoscale together (tested below)
  const std::string too_many_stages = R"({"model": "llama-3-70b", "tp": 4, "pp": 4, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK_THAT(error_of(scenario(too_many_stages)), Catch::Contains("/serving/0/replicas") && Catch::Contains("0 of the 1 replicas of TP 4 x PP 4 found room"));
}

TEST_CASE("replicas that swap pin their swap space in their node's host memory, which several on a node share", "[serving][scenario]") {
  // An HGX H100 node has 2 TB of host memory; vLLM refuses an engine whose swap spaces pass 70% of it
  // (1.4 TB). Six TP-1 replicas of 200 GB each pin 1.2 TB of one node: accepted; eight pin 1.6 TB: refused,
  // though each alone is far under. Across deployments the node's total counts.
  const auto swapping = [](const std::string& name, int replicas) {
    return R"({"name": ")" + name + R"(", "model": "llama-3-8b", "replicas": )" + std::to_string(replicas) +
           R"(, "knobs": {"preemption": "swap", "swap_space": "200 GB"}, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  };
  CHECK(error_of(scenario(swapping("a", 6))).empty());
  CHECK_THAT(error_of(scenario(swapping("a", 8))), Catch::Contains("/serving/0/knobs") && Catch::Contains("the replicas on node 0") &&
                                                         Catch::Contains("more swap space than 70% of its 2 TB of host memory"));
  CHECK_THAT(error_of(scenario(swapping("a", 4) + ", " + swapping("b", 4))), Catch::Contains("/serving/1/knobs") && Catch::Contains("with the deployments above"));
  // Recomputing instead of swapping, eight replicas pin nothing.
  const std::string recompute = R"({"name": "c", "model": "llama-3-8b", "replicas": 8, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK(error_of(scenario(recompute)).empty());
}

TEST_CASE("pipeline stages in a scenario lie on the nodes as their iteration time has them", "[serving][scenario][pp]") {
  // (node, first GPU, GPUs) of each piece of each replica.
  const auto stages = [](const ServingDeployment& d) {
    std::vector<std::tuple<std::uint32_t, int, int>> out;
    for (const ServingDeployment::Placement& p : d.placement) out.emplace_back(p.node, p.first_gpu, p.gpus);
    return out;
  };
  using Stages = std::vector<std::tuple<std::uint32_t, int, int>>;
  const std::string two_nodes = R"([{"type": "hgx-h100-8", "count": 2}])", three_nodes = R"([{"type": "hgx-h100-8", "count": 3}])";
  // Two stages of TP 4 fill a node: one replica a node.
  const std::string within = R"({"name": "big", "model": "llama-3-70b", "tp": 4, "pp": 2, "replicas": 2, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK(stages(*parse_scenario(scenario(within, "", two_nodes), "s.json", ".").serving[0]) == Stages{{0, 0, 8}, {1, 0, 8}});
  // Beside one GPU another deployment holds on node 0: four stages take nodes 1 and 2 whole; three
  // stages take node 1 whole and the last stage's four GPUs on node 0, as GPUs 8-11 of the timed layout.
  const std::string small = R"({"name": "small", "model": "llama-3-8b", "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}}, )";
  const std::string four = R"({"name": "big", "model": "llama-3-70b", "tp": 4, "pp": 4, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK(stages(*parse_scenario(scenario(small + four, "", three_nodes), "s.json", ".").serving[1]) == Stages{{1, 0, 8}, {2, 0, 8}});
  const std::string three = R"({"name": "big", "model": "llama-3-70b", "tp": 4, "pp": 3, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  const Scenario sc = parse_scenario(scenario(small + three, "", three_nodes), "s.json", ".");
  CHECK(stages(*sc.serving[1]) == Stages{{1, 0, 8}, {0, 1, 4}});
  // A TP group over two nodes takes both whole.
  const std::string wide = R"({"name": "big", "model": "llama-3.1-405b", "tp": 16, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})";
  CHECK(stages(*parse_scenario(scenario(small + wide, "", three_nodes), "s.json", ".").serving[1]) == Stages{{1, 0, 8}, {2, 0, 8}});
  // Said on the page's text, a replica's pieces joined; and its stage sends' guess.
  const RunResult run = simulate(sc);
  std::ostringstream text;
  write_serving_text(text, *run.summary.serving[1].deployment, run.summary.serving[1]);
  CHECK_THAT(text.str(), Catch::Contains("placed      node 1 GPUs 0-7 + node 0 GPUs 1-4"));
  CHECK_THAT(text.str(), Catch::Contains("stage sends are timed on its own links"));
  CHECK(run.summary.serving[1].completed == 1);
}

TEST_CASE("a data-parallel attention replica in a scenario serves exactly what serve serves, and a GPU failure stops every rank", "[serving][scenario][dp-attention]") {
  const std::string requests = R"("requests": {"rate": "8 /s", "count": 400, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [32, 256]}})";
  const std::string ds = R"({"name": "ds", "model": "deepseek-v3", "weights": "fp8", "engine": "sglang", "tp": 8, "dp_attention": true, )" + requests + "}";
  const std::string h200 = R"([{"type": "hgx-h200-8", "count": 1}])";
  const RunResult run = simulate(parse_scenario(scenario(ds, "", h200), "s.json", "."));
  const ServingResult& in_run = run.summary.serving.front();
  const ServingResult served = simulate_serving(parse_serving(R"({"name": "ds", "seed": 3, "cluster": {"nodes": )" + h200 +
                                                                  R"(}, "model": "deepseek-v3", "weights": "fp8", "engine": "sglang", "tp": 8, "dp_attention": true, )" + requests + "}",
                                                              "ds.json"));
  CHECK(in_run.completed == 400);
  CHECK(in_run.iterations == served.iterations);
  CHECK(in_run.ttft_s.p95 == served.ttft_s.p95);
  CHECK(in_run.busy.expert_alltoall_s > 0);
  CHECK(run.summary.gpu_busy_s == Approx(served.gpu_busy_s).epsilon(1e-12));
  // GPU 3 fails at 5 s for 30 s: all eight ranks stop (one replica failure), their requests wait for the
  // replica to restart, and every one is served.
  const std::string fault = R"(, "faults": {"events": [{"at": "5 s", "gpu": "n0.g3", "for": "30 s"}]})";
  const RunResult failed = simulate(parse_scenario(scenario(ds, fault, h200), "s.json", "."));
  const ServingResult& r = failed.summary.serving.front();
  CHECK(r.completed == 400);
  CHECK(r.replica_failures == 1);
  CHECK(r.requests_rerouted > 0);
  CHECK(r.ttft_s.max > 30);
}

TEST_CASE("a pipeline-parallel replica in a scenario serves exactly what serve serves, and a GPU failure stops every lane of it", "[serving][scenario][pp]") {
  const std::string requests = R"("requests": {"rate": "4 /s", "count": 300, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [32, 256]}})";
  const std::string one = R"({"name": "big", "model": "llama-3-70b", "tp": 4, "pp": 2, )" + requests + "}";
  const RunResult run = simulate(parse_scenario(scenario(one), "s.json", "."));
  const ServingResult& in_run = run.summary.serving.front();
  const ServingResult served = simulate_serving(parse_serving(R"({"name": "big", "seed": 3, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-70b",
      "tp": 4, "pp": 2, "replicas": 1, )" + requests + "}", "big.json"));
  CHECK(in_run.completed == 300);
  CHECK(in_run.iterations == served.iterations);
  CHECK(in_run.ttft_s.p95 == served.ttft_s.p95);
  CHECK(in_run.tpot_s.p99 == served.tpot_s.p99);
  CHECK(in_run.busy.stage_send_s > 0);
  CHECK(run.summary.gpu_busy_s == Approx(served.gpu_busy_s).epsilon(1e-12));
  // Two replicas a node each; GPU 5 of node 0 (the first replica's second stage) fails at 5 s for 30 s:
  // both lanes of that replica stop, counted as one replica failure, their requests go to the other
  // replica's lanes, and every request is served.
  const std::string two = R"({"name": "big", "model": "llama-3-70b", "tp": 4, "pp": 2, "replicas": 2, "router": "least-tokens", )" + requests + "}";
  const std::string fault = R"(, "faults": {"events": [{"at": "5 s", "gpu": "n0.g5", "for": "30 s"}]})";
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 2}])";
  const RunResult failed = simulate(parse_scenario(scenario(two, fault, nodes), "s.json", "."));
  const ServingResult& r = failed.summary.serving.front();
  CHECK(r.completed == 300);
  CHECK(r.replica_failures == 1);
  CHECK(r.requests_rerouted > 0);
  const RunResult calm = simulate(parse_scenario(scenario(two, "", nodes), "s.json", "."));
  CHECK(calm.summary.serving.front().replica_failures == 0);
  CHECK(r.prompt_tokens > calm.summary.serving.front().prompt_tokens);
  CHECK(r.e2e_s.mean > calm.summary.serving.front().e2e_s.mean);
  CHECK(summary_json(failed.summary) == summary_json(simulate(parse_scenario(scenario(two, fault, nodes), "s.json", ".")).summary));
}

TEST_CASE("a plan over a scenario with serving fails the node counts its replicas do not fit and weighs the serving SLOs", "[serving][scenario][plan]") {
  const std::string three = R"({"name": "chat", "model": "llama-3-8b", "tp": 4, "replicas": 3,
      "requests": {"rate": "20 /s", "count": 200, "prompt_tokens": 512, "output_tokens": 64},
      "slos": [{"metric": "ttft", "percentile": 95, "target": "1 s"}]})";
  const PlanResult result = test::plan_over_node_counts(scenario(three, "", R"([{"type": "hgx-h100-8", "count": 1}])"), "hgx-h100-8", 3);
  const auto at = [&](int nodes) {
    const PlanPoint* p = test::searched_point(result, nodes);
    REQUIRE(p != nullptr);
    return *p;
  };
  CHECK_FALSE(at(1).passes);
  CHECK(at(1).verdict == "the serving replicas do not fit 1 x hgx-h100-8");
  CHECK(at(1).gpus == 8);
  REQUIRE(at(2).passes);
  REQUIRE(at(2).slos.size() == 1);
  CHECK(at(2).slos[0].name == "chat ttft_p95");
  REQUIRE(result.loads.size() == 1);
  REQUIRE(result.loads[0].point.has_value());
  CHECK(result.points[*result.loads[0].point].nodes == 2);
}

TEST_CASE("a GPU failure takes its replica down: its requests go to the other replica, and it serves again after its restart", "[serving][scenario]") {
  // Two replicas; GPU 0 (replica 1) fails at 5 s for 30 s. Its requests are routed to replica 2, then
  // both serve again once replica 1 has restarted (its engine's start-up and weights).
  const std::string two = R"({"name": "chat", "model": "llama-3-8b", "replicas": 2, "router": "least-tokens",
      "requests": {"rate": "10 /s", "count": 1200, "prompt_tokens": 512, "output_tokens": 128},
      "slos": [{"metric": "ttft", "percentile": 99, "target": "10 s"}]})";
  const std::string fault = R"(, "faults": {"events": [{"at": "5 s", "gpu": "n0.g0", "for": "30 s"}]})";
  const Scenario sc = parse_scenario(scenario(two, fault), "s.json", ".");
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 1200);
  CHECK(r.replica_failures == 1);
  CHECK(r.requests_rerouted > 0);
  CHECK(run.summary.gpu_failures == 1);
  // Against the same run without the failure: as many tokens out, later on the whole.
  const RunResult calm = simulate(parse_scenario(scenario(two), "s.json", "."));
  const ServingResult& c = calm.summary.serving.front();
  CHECK(c.replica_failures == 0);
  CHECK(r.output_tokens_per_s * r.makespan_s == Approx(c.output_tokens_per_s * c.makespan_s));
  CHECK(r.e2e_s.mean > c.e2e_s.mean);
  // Rerouted requests recompute what they had: more prompt tokens admitted than the requests brought.
  CHECK(r.prompt_tokens > c.prompt_tokens);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("after it is given GPUs") != std::string::npos && n.find("a guess") != std::string::npos; }));
  // One replica alone, down for 30 s: every request waits for it, and none is lost.
  const std::string one = R"({"name": "solo", "model": "llama-3-8b", "requests": {"rate": "10 /s", "count": 600, "prompt_tokens": 512, "output_tokens": 128}})";
  const RunResult solo = simulate(parse_scenario(scenario(one, fault), "s.json", "."));
  CHECK(solo.summary.serving.front().completed == 600);
  CHECK(solo.summary.serving.front().ttft_s.max > 30);
  CHECK(summary_json(solo.summary) == summary_json(simulate(parse_scenario(scenario(one, fault), "s.json", ".")).summary));
  // Its GPU fails again during the restart (at 20 s, for 100 s): the start-up stops and begins again once the
  // GPU is back, so nothing is served before 120 s and a minute of start-up (it used to come up on the failed GPU).
  const std::string twice = R"(, "faults": {"events": [{"at": "5 s", "gpu": "n0.g0", "for": "1 s"}, {"at": "20 s", "gpu": "n0.g0", "for": "100 s"}]})";
  const RunResult again = simulate(parse_scenario(scenario(one, twice), "s.json", "."));
  const ServingResult& a = again.summary.serving.front();
  CHECK(a.completed == 600);
  CHECK(a.replica_failures == 2);
  CHECK(a.ttft_s.max > 120 + 60 - 5);
}

TEST_CASE("disaggregated replicas on two nodes move each KV cache over the shared network, rank to rank", "[serving][scenario]") {
  // Each of the 8 TP ranks sends its share (one KV head's) of the 2,048 tokens to the same rank on the
  // other node, all at once, each over its own NIC: one share's route latency and its bottleneck.
  const std::string pd = R"({"name": "pd", "model": "llama-3-70b", "tp": 8, "disaggregation": {"prefill": 1, "decode": 1},
      "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}})";
  const Scenario sc = parse_scenario(scenario(pd, "", R"([{"type": "hgx-h100-8", "count": 2}])"), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 2);
  CHECK(sc.serving[0]->placement[1].node == 1);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  const double share = 2048 * kv_capacity(*sc.serving[0]).kv_bytes_per_token;
  std::vector<std::uint32_t> route;
  run.topology.route(run.topology.gpu_vertex(make_id<GpuId>(0)), run.topology.gpu_vertex(make_id<GpuId>(8)), 0, route);
  CHECK(r.kv_transfers == 1);
  CHECK(r.kv_on_shared_network);
  CHECK(r.kv_transfer_s == Approx(run.topology.latency_s(route) + share / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
  CHECK(r.completed == 1);
  // The bytes are on the links: 8 shares out of node 0's NICs.
  double nic_bytes = 0;
  for (std::uint32_t l = 0; l < run.topology.links().size(); ++l) {
    if (run.topology.links()[l].cls == LinkClass::nic && run.topology.vertex_name(run.topology.links()[l].from).rfind("n0.", 0) == 0) nic_bytes += run.link_bytes[l];
  }
  CHECK(nic_bytes == Approx(8 * share));
  // Layer by layer: all but the last of the 80 layers' KV went while the prompt's pass ran (the NIC carries the
  // whole share in far less than the pass), so each share's last layer is left.
  const Scenario layered = parse_scenario(scenario(std::string(pd).replace(pd.find("\"decode\": 1}"), 12, R"("decode": 1, "kv_transfer": "by_layer"})"), "",
                                                   R"([{"type": "hgx-h100-8", "count": 2}])"), "s.json", ".");
  const ServingResult l = simulate(layered).summary.serving.front();
  CHECK(share / run.topology.bottleneck_Bps(route) < r.ttft_s.p50 / 10);
  CHECK(l.kv_transfer_s == Approx(run.topology.latency_s(route) + share / 80 / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
  CHECK(l.kv_transfer_bytes == Approx(r.kv_transfer_bytes));  // what the decode replica holds, counted whole

  // Nodes of four PCIe H100s and one NIC: the four ranks' shares queue through it, where timed alone
  // (`serve`) each had a NIC to itself.
  const std::string pcie = R"({"name": "pd", "model": "llama-3-8b", "tp": 4, "disaggregation": {"prefill": 1, "decode": 1},
      "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}})";
  const Scenario four = parse_scenario(scenario(pcie, "", R"([{"type": "h100-pcie-4", "count": 2}])"), "s.json", ".");
  const RunResult one_nic = simulate(four);
  const ServingResult& q = one_nic.summary.serving.front();
  const double quarter = 2048 * kv_capacity(*four.serving[0]).kv_bytes_per_token;
  const LinkType& nic = four.cluster.groups.front().nic;
  route.clear();
  one_nic.topology.route(one_nic.topology.gpu_vertex(make_id<GpuId>(0)), one_nic.topology.gpu_vertex(make_id<GpuId>(4)), 0, route);
  REQUIRE(one_nic.topology.bottleneck_Bps(route) == Approx(nic.bandwidth_Bps));
  CHECK(q.kv_transfer_s == Approx(one_nic.topology.latency_s(route) + 4 * quarter / nic.bandwidth_Bps).epsilon(1e-9));

  // One 25 Gb/s NIC for a node's eight GPUs, slower than Llama 3 70B's prefill makes KV: layer by layer, the
  // NIC's capacity during the pass is shared by the eight shares, so the transfer after the prompt shrinks by
  // at most the pass (each share credited the whole NIC would leave only the last layer's).
  const auto slow_nic = [&](const std::string& mode) {
    const std::string json = std::string(pd).replace(pd.find("\"decode\": 1}"), 12, "\"decode\": 1, \"kv_transfer\": \"" + mode + "\"}");
    return simulate(parse_scenario(scenario(json, "", R"([{"type": "hgx-h100-8", "count": 2, "node_overrides": {"nic": "eth-25g", "nics": 1}}])"), "s.json", "."))
        .summary.serving.front();
  };
  const ServingResult bulk = slow_nic("after_prefill"), streamed = slow_nic("by_layer");
  REQUIRE(bulk.kv_transfer_s > 2 * bulk.ttft_s.p50);  // the NIC is the bottleneck
  CHECK(streamed.kv_transfer_s > bulk.kv_transfer_s - bulk.ttft_s.p50);
  CHECK(streamed.kv_transfer_s < bulk.kv_transfer_s - 0.9 * bulk.ttft_s.p50);
}

TEST_CASE("disaggregated pipeline-parallel replicas move each stage's KV from its GPUs to the same GPUs of the decode replica over the shared network", "[serving][scenario][pp]") {
  // Llama 3 70B at TP 4 x PP 3 (stages of 27, 27 and 26 layers; a GPU two KV heads of 128: 2 x 2 x 128 x 2
  // bytes a layer a token) on three HGX H100s: the prefill replica on node 0 (stages 0 and 1) and node 1's
  // GPUs 0-3 (stage 2), the decode replica on node 2 and node 1's GPUs 4-7. Each GPU sends its stage's
  // share to the same GPU of the other, all at once: node 0's eight GPUs 27 layers' each over the NICs,
  // node 1's stage 2 its 26 layers' over NVLink, no NIC.
  const std::string pd = R"({"name": "pd", "model": "llama-3-70b", "tp": 4, "pp": 3, "disaggregation": {"prefill": 1, "decode": 1},
      "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}})";
  const Scenario sc = parse_scenario(scenario(pd, "", R"([{"type": "hgx-h100-8", "count": 3}])"), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 4);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  const double per_layer = 2048.0 * 2 * 2 * 128 * 2;
  CHECK(r.completed == 1);
  CHECK(r.kv_transfers == 1);
  CHECK(r.kv_transfer_bytes == Approx(2048.0 * 2 * 80 * 8 * 128 * 2).epsilon(1e-12));  // the whole model's KV
  const auto nic_bytes_from = [&](const std::string& node) {
    double bytes = 0;
    for (std::uint32_t l = 0; l < run.topology.links().size(); ++l) {
      if (run.topology.links()[l].cls == LinkClass::nic && run.topology.vertex_name(run.topology.links()[l].from).rfind(node, 0) == 0) bytes += run.link_bytes[l];
    }
    return bytes;
  };
  CHECK(nic_bytes_from("n0.") == Approx(8 * 27 * per_layer));
  CHECK(nic_bytes_from("n1.") == 0);
  // The transfer ends with its slowest share: one of node 0's over its route to node 2.
  std::vector<std::uint32_t> route;
  run.topology.route(run.topology.gpu_vertex(make_id<GpuId>(0)), run.topology.gpu_vertex(make_id<GpuId>(16)), 0, route);
  CHECK(r.kv_transfer_s == Approx(run.topology.latency_s(route) + 27 * per_layer / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
  // Layer by layer: the last stage's 26 layers set the window and the floor, 1/26 of each share left.
  const std::string layered = std::string(pd).replace(pd.find("\"decode\": 1}"), 12, R"("decode": 1, "kv_transfer": "by_layer"})");
  const ServingResult l = simulate(parse_scenario(scenario(layered, "", R"([{"type": "hgx-h100-8", "count": 3}])"), "s.json", ".")).summary.serving.front();
  CHECK(l.kv_transfer_s == Approx(run.topology.latency_s(route) + 27 * per_layer / 26 / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
  // A GPU of the decode replica's last stage (node 1's GPU 6: its TP rank 2 there) fails halfway through the
  // transfer, for a second: every stage's flows stop at once, and the request is prefilled and moved again
  // once the replica is back: half a transfer lost, then a whole one.
  const double fail_s = r.ttft_s.p50 + r.kv_transfer_s / 2;
  const std::string fault = R"(, "faults": {"events": [{"at": ")" + std::to_string(fail_s * 1e3) + R"( ms", "gpu": "n1.g6", "for": "1 s"}]})";
  const RunResult cut = simulate(parse_scenario(scenario(pd, fault, R"([{"type": "hgx-h100-8", "count": 3}])"), "s.json", "."));
  const ServingResult& c = cut.summary.serving.front();
  CHECK(c.completed == 1);
  CHECK(c.replica_failures == 1);
  CHECK(c.kv_transfers == 2);
  CHECK(c.requests_rerouted == 1);
  CHECK(c.kv_transfer_s == Approx(1.5 * r.kv_transfer_s).epsilon(1e-3));
}

TEST_CASE("data-parallel attention split into prefill and decode replicas moves each KV from one rank's GPU to another's over the shared network", "[serving][scenario][dp-attention]") {
  // One request: the prefill rank's whole KV (one GPU's, not eight shares) to the decode rank on the other node,
  // one flow over its NIC; the bytes out of node 0's NICs are that one share.
  const std::string pd = R"({"name": "pd", "model": "deepseek-v3", "weights": "fp8", "engine": "sglang", "tp": 8, "dp_attention": true,
      "disaggregation": {"prefill": 1, "decode": 1}, "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}})";
  const Scenario sc = parse_scenario(scenario(pd, "", R"([{"type": "hgx-h200-8", "count": 2}])"), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 2);
  REQUIRE(sc.serving[0]->placement[1].node == 1);  // the decode replica's ranks are GPUs 8 to 15
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  const double share = 2048 * kv_capacity(*sc.serving[0]).kv_bytes_per_token;
  CHECK(r.completed == 1);
  CHECK(r.kv_transfers == 1);
  CHECK(r.kv_on_shared_network);
  CHECK(r.kv_transfer_bytes == Approx(share).epsilon(1e-12));
  double nic_bytes = 0;
  for (std::uint32_t l = 0; l < run.topology.links().size(); ++l) {
    if (run.topology.links()[l].cls == LinkClass::nic && run.topology.vertex_name(run.topology.links()[l].from).rfind("n0.", 0) == 0) nic_bytes += run.link_bytes[l];
  }
  CHECK(nic_bytes == Approx(share));
  // The same as `serve` times it alone where nothing else is on the network: one NIC's route.
  std::vector<std::uint32_t> route;
  run.topology.route(run.topology.gpu_vertex(make_id<GpuId>(0)), run.topology.gpu_vertex(make_id<GpuId>(8)), 0, route);
  CHECK(r.kv_transfer_s == Approx(run.topology.latency_s(route) + share / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
}

TEST_CASE("a data-parallel decode rank out of reach takes no KV, the other ranks take it all, and a failed rank's GPU stops its replica", "[serving][scenario][dp-attention]") {
  // The cable into decode rank 3's NIC (GPU n1.g3, lane 11) is down for the whole run: the router sends no KV
  // there (reach is judged rank to rank), so none is stranded and nothing is prefilled twice. Judged replica
  // to replica, the decode replica would be out of reach of every prefill rank and nothing would be decoded.
  const std::string pd = R"({"name": "pd", "model": "deepseek-v3", "weights": "fp8", "engine": "sglang", "tp": 8, "dp_attention": true,
      "disaggregation": {"prefill": 1, "decode": 1}, "requests": {"rate": "8 /s", "count": 80, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [16, 64]}}})";
  const std::string nodes = R"([{"type": "hgx-h200-8", "count": 2}])";
  const std::string cable = R"(, "faults": {"events": [{"at": "1 ms", "link": "switch>n1.nic3", "for": "1000 s"}]})";
  const ServingResult cut = simulate(parse_scenario(scenario(pd, cable, nodes), "s.json", ".")).summary.serving.front();
  CHECK(cut.completed == 80);
  CHECK(cut.kv_transfers == 80);
  CHECK(cut.requests_rerouted == 0);
  // Prefill rank 5's GPU fails for 10 s mid-run: the whole prefill replica stops (its ranks step together), the
  // prompts arriving meanwhile wait for it, and every request is served once it is back.
  const std::string gpu = R"(, "faults": {"events": [{"at": "4 s", "gpu": "n0.g5", "for": "10 s"}]})";
  const ServingResult down = simulate(parse_scenario(scenario(pd, gpu, nodes), "s.json", ".")).summary.serving.front();
  CHECK(down.completed == 80);
  CHECK(down.replica_failures == 1);
  CHECK(down.ttft_s.max > 10);
}

TEST_CASE("a KV transfer whose NIC cable fails is lost: the request is prefilled again and decoded once the cable is back", "[serving][scenario]") {
  const std::string pd = R"({"name": "pd", "model": "llama-3-8b", "tp": 4, "disaggregation": {"prefill": 1, "decode": 1},
      "requests": {"count": 1, "prompt_tokens": 8192, "output_tokens": 16}})";
  const std::string nodes = R"([{"type": "h100-pcie-4", "count": 2}])";
  const ServingResult calm = simulate(parse_scenario(scenario(pd, "", nodes), "s.json", ".")).summary.serving.front();
  REQUIRE(calm.kv_transfers == 1);
  // The cable of node 0's only NIC fails halfway through the transfer, for a second.
  const double fail_s = calm.ttft_s.p50 + calm.kv_transfer_s / 2;
  const std::string fault = R"(, "faults": {"events": [{"at": ")" + std::to_string(fail_s * 1e3) + R"( ms", "link": "n0.nic0>switch", "for": "1 s"}]})";
  const ServingResult cut = simulate(parse_scenario(scenario(pd, fault, nodes), "s.json", ".")).summary.serving.front();
  CHECK(cut.completed == 1);
  CHECK(cut.ttft_s.p50 == Approx(calm.ttft_s.p50));
  // While the cable is down the decode replica is out of reach: the request waits for the repair rather
  // than being prefilled for a transfer that has no route. Once more: its prompt and first token.
  CHECK(cut.requests_rerouted == 1);
  CHECK(cut.kv_transfers == 2);
  CHECK(cut.prompt_tokens == 2 * calm.prompt_tokens + 1);
  CHECK(cut.e2e_s.max > fail_s + 1 + calm.ttft_s.p50 + calm.kv_transfer_s);
  // The decode replica's GPU fails halfway through instead: the transfer stops at once (its flows are
  // cancelled), and the request is prefilled again once a decode replica is back to take it.
  const std::string gpu = R"(, "faults": {"events": [{"at": ")" + std::to_string(fail_s * 1e3) + R"( ms", "gpu": "n1.g0", "for": "1 s"}]})";
  const ServingResult down = simulate(parse_scenario(scenario(pd, gpu, nodes), "s.json", ".")).summary.serving.front();
  CHECK(down.completed == 1);
  CHECK(down.replica_failures == 1);
  CHECK(down.kv_transfers == 2);
  // Half of the lost one, then a whole one (of one token more: the first output token is prefilled again too).
  CHECK(down.kv_transfer_s == Approx(1.5 * calm.kv_transfer_s).epsilon(1e-3));
}

TEST_CASE("while a prefill replica cannot reach any decode replica, the router sends prompts to one that can", "[serving][scenario]") {
  // Three nodes of four PCIe H100s and one NIC each: prefill replicas on nodes 0 and 1, the decode replica
  // on node 2. Node 0's cable is down for the whole run: every prompt goes to node 1, prefilled once.
  const std::string pd = R"({"name": "pd", "model": "llama-3-8b", "tp": 4, "disaggregation": {"prefill": 2, "decode": 1},
      "requests": {"rate": "4 /s", "count": 12, "prompt_tokens": 1024, "output_tokens": 8}})";
  const std::string fault = R"(, "faults": {"events": [{"at": "1 ms", "link": "n0.nic0>switch", "for": "1000 s"}]})";
  const Scenario sc = parse_scenario(scenario(pd, fault, R"([{"type": "h100-pcie-4", "count": 3}])"), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 3);
  REQUIRE(sc.serving[0]->placement[0].node == 0);
  REQUIRE(sc.serving[0]->placement[2].node == 2);
  const ServingResult r = simulate(sc).summary.serving.front();
  CHECK(r.completed == 12);
  CHECK(r.requests_rerouted == 0);
  CHECK(r.kv_transfers == 12);
  CHECK(r.prompt_tokens == 12 * 1024);
  // Node 0's cable fails while it prefills the one request: its KV has nowhere to go, so it is prefilled
  // again at once on node 1, not after the 1,000 s repair.
  const std::string one = R"({"name": "pd", "model": "llama-3-8b", "tp": 4, "disaggregation": {"prefill": 2, "decode": 1},
      "requests": {"count": 1, "prompt_tokens": 8192, "output_tokens": 8}})";
  const ServingResult calm = simulate(parse_scenario(scenario(one, "", R"([{"type": "h100-pcie-4", "count": 3}])"), "s.json", ".")).summary.serving.front();
  const std::string mid = R"(, "faults": {"events": [{"at": ")" + std::to_string(calm.ttft_s.p50 / 2 * 1e3) + R"( ms", "link": "n0.nic0>switch", "for": "1000 s"}]})";
  const ServingResult cut = simulate(parse_scenario(scenario(one, mid, R"([{"type": "h100-pcie-4", "count": 3}])"), "s.json", ".")).summary.serving.front();
  CHECK(cut.completed == 1);
  CHECK(cut.requests_rerouted == 1);
  CHECK(cut.prompt_tokens == 2 * 8192 + 1);
  CHECK(cut.e2e_s.max < 3 * calm.e2e_s.max);
}

TEST_CASE("KV transfers share the NICs with a training gang's all-reduce, and slow down beside it", "[serving][scenario]") {
  // Three nodes of four PCIe H100s and one NIC each: two prefill replicas fill node 0, the decode replica
  // takes half of node 1. A six-GPU gang on the GPUs left (node 1's other two and node 2) all-reduces
  // through node 1's NIC, the one every KV cache comes in by.
  const std::string pd = R"({"name": "pd", "model": "llama-3-8b", "tp": 2, "disaggregation": {"prefill": 2, "decode": 1},
      "requests": {"rate": "4 /s", "count": 40, "prompt_tokens": 4096, "output_tokens": 16}})";
  const std::string gang = R"(, "workflows": {"sync": {"name": "sync", "tasks": [
      {"name": "reduce", "gpus": 6, "work": {"flop": "1 TFLOP"}, "collective": {"op": "all-reduce", "bytes": "40 GB"}}]}},
    "workload": [{"workflow": "sync", "arrival": {"process": "once", "count": 4}}])";
  const std::string nodes = R"([{"type": "h100-pcie-4", "count": 3}])";
  const RunResult alone = simulate(parse_scenario(scenario(pd, "", nodes), "s.json", "."));
  const RunResult beside = simulate(parse_scenario(scenario(pd, gang, nodes), "s.json", "."));
  const ServingResult& a = alone.summary.serving.front();
  const ServingResult& b = beside.summary.serving.front();
  REQUIRE(beside.summary.serving.front().deployment->placement[2].node == 1);
  CHECK(a.completed == 40);
  CHECK(b.completed == 40);
  CHECK(a.kv_transfers == b.kv_transfers);
  CHECK(b.kv_transfer_s > 1.2 * a.kv_transfer_s);
  CHECK(b.e2e_s.mean > a.e2e_s.mean);
}

TEST_CASE("an autoscaled deployment adds replicas on free GPUs as its queue grows and gives them back when idle", "[serving][scenario]") {
  // 60 requests/s on one replica of Llama 3 8B: the queue grows; every 10 s one more replica is started
  // (a minute of start-up each), up to 4. After the burst, replicas drain and give their GPUs back.
  const std::string burst = R"({"name": "chat", "model": "llama-3-8b", "router": "least-tokens", "autoscale": {"min": 1, "max": 4, "interval": "10 s"},
      "requests": {"rate": "60 /s", "count": 6000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const Scenario sc = parse_scenario(scenario(burst), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 1);  // min placed; the rest are slots
  CHECK(sc.serving[0]->replicas == 4);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 6000);
  CHECK(r.scaled.ups == 3);
  CHECK(r.scaled.ups_without_gpus == 0);
  CHECK(r.replica_s > 1.5 * r.makespan_s);  // more than one replica on average
  // Against one replica alone: the added ones cut the waiting.
  std::string fixed = burst;
  fixed.replace(fixed.find(R"("autoscale": {"min": 1, "max": 4, "interval": "10 s"},)"), 57, "");
  const ServingResult one = simulate(parse_scenario(scenario(fixed), "s.json", ".")).summary.serving.front();
  CHECK(r.ttft_s.p95 < one.ttft_s.p95);
  // Beside a task holding 7 GPUs for an hour, no GPU is free: the additions wanted are counted, not made.
  const std::string hog = R"(, "workflows": {"hog": {"name": "hog", "tasks": [{"name": "a", "gpus": 7, "work": {"flop": "100000 PFLOP"}}]}},
      "workload": [{"workflow": "hog", "arrival": {"process": "once", "count": 1}}])";
  const RunResult crowded = simulate(parse_scenario(scenario(burst, hog), "s.json", "."));
  const ServingResult& c = crowded.summary.serving.front();
  CHECK(c.scaled.ups == 0);
  CHECK(c.scaled.ups_without_gpus > 0);
  CHECK(c.completed == 6000);
  // Drained replicas' GPUs go back to the tasks: 1-GPU tasks arriving long after the burst use every GPU
  // but the one the last replica keeps.
  CHECK(r.scaled.downs == 3);
  const std::string later = R"(, "workflows": {"one": {"name": "one", "tasks": [{"name": "a", "gpus": 1, "work": {"flop": "1000 PFLOP"}}]}},
      "workload": [{"workflow": "one", "arrival": {"process": "times", "times": ["1 h", "1 h", "1 h", "1 h", "1 h", "1 h", "1 h"]}}])";
  const RunResult after = simulate(parse_scenario(scenario(burst, later), "s.json", "."));
  const std::set<std::uint32_t> used = gpus_used(after);
  CHECK(used == std::set<std::uint32_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "replicas": 2, "autoscale": {"min": 1, "max": 2}, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})")),
             Catch::Contains("/serving/0/replicas: an autoscaled deployment"));
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"min": 3, "max": 2}, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}})")),
             Catch::Contains("/serving/0/autoscale/max: expected at least min"));
}

TEST_CASE("a disaggregated deployment scales its prefill and decode replicas apart, each pool on its own queue", "[serving][scenario][autoscale]") {
  // Llama 3 8B on one HGX H100, one prefill and one decode replica to start, each pool up to three. Long
  // prompts with short outputs overload the prefill replica alone; short prompts with long outputs the
  // decode replica alone (more sequences than its batch takes). Each burst grows its own pool only, and
  // after it the added replicas drain back.
  const auto pd = [](const std::string& prompt, const std::string& output, const std::string& rate) {
    return R"({"name": "pd", "model": "llama-3-8b", "router": "least-tokens", "disaggregation": {},
        "autoscale": {"prefill": {"min": 1, "max": 3}, "decode": {"min": 1, "max": 3}, "interval": "10 s"},
        "requests": {"rate": ")" + rate + R"(", "count": 3000, "prompt_tokens": )" + prompt + R"(, "output_tokens": )" + output + "}}";
  };
  const Scenario sc = parse_scenario(scenario(pd("8192", "8", "12 /s")), "s.json", ".");
  const ServingDeployment& d = *sc.serving[0];
  CHECK(d.prefill_replicas == 3);
  CHECK(d.replicas == 6);
  REQUIRE(d.placement.size() == 2);  // the first slot of each pool placed
  CHECK((d.starts_placed(0) && !d.starts_placed(1) && !d.starts_placed(2) && d.starts_placed(3) && !d.starts_placed(4)));
  const ServingResult prefill_bound = simulate(sc).summary.serving.front();
  CHECK(prefill_bound.completed == 3000);
  CHECK(prefill_bound.scaled.ups == 2);
  CHECK(prefill_bound.scaled.downs == 2);
  CHECK(prefill_bound.decode_scaled.ups == 0);
  CHECK(prefill_bound.requests_rerouted == 0);
  const ServingResult decode_bound = simulate(parse_scenario(scenario(pd("64", "2048", "12 /s")), "s.json", ".")).summary.serving.front();
  CHECK(decode_bound.completed == 3000);
  CHECK(decode_bound.scaled.ups == 0);
  CHECK(decode_bound.decode_scaled.ups > 0);
  CHECK(decode_bound.decode_scaled.downs == decode_bound.decode_scaled.ups);
  CHECK(decode_bound.requests_rerouted == 0);
  CHECK(decode_bound.kv_transfers == 3000);  // each KV cache moved once, none lost to a drain
  std::ostringstream text;
  write_serving_text(text, d, prefill_bound);
  CHECK_THAT(text.str(), Catch::Contains("up to 6 replicas x TP 1 on h100-sxm"));  // the slots: 3 of each pool
  CHECK_THAT(text.str(), Catch::Contains("placed      node 0 GPU 0, node 0 GPU 1\n"));
  CHECK_THAT(text.str(), Catch::Contains("autoscale   prefill 1 to 3 replicas: 2 added, 2 removed; decode 1 to 3 replicas: 0 added, 0 removed;"));
  // The only decode replica's GPU fails for an hour: requests then find no replica (a prefill replica takes a
  // prompt only where its KV cache can go on), and the decode pool, not the prefill pool, adds one on a free GPU.
  const std::string fault = R"(, "faults": {"events": [{"at": "5 s", "gpu": "n0.g1", "for": "1 h"}]})";
  const ServingResult failed = simulate(parse_scenario(scenario(pd("512", "64", "4 /s"), fault), "s.json", ".")).summary.serving.front();
  CHECK(failed.completed == 3000);
  CHECK(failed.decode_scaled.ups >= 1);
  CHECK(failed.scaled.ups == 0);
  CHECK(failed.last_finish_s < 3600);  // long before the repair

  const std::string requests = R"("requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8})";
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"min": 1, "max": 2}, "disaggregation": {}, )" + requests + "}")),
             Catch::Contains("/serving/0/autoscale/min: a disaggregated deployment scales its prefill and decode replicas apart"));
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"prefill": {"min": 1, "max": 2}, "decode": {"min": 1, "max": 2}}, "disaggregation": {"prefill": 1, "decode": 1}, )" + requests + "}")),
             Catch::Contains("/serving/0/disaggregation/prefill: an autoscaled deployment's prefill and decode replicas are autoscale's"));
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"prefill": {"min": 1, "max": 2}, "decode": {"min": 3, "max": 2}}, "disaggregation": {}, )" + requests + "}")),
             Catch::Contains("/serving/0/autoscale/decode/max: expected at least min (3), found 2"));
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"prefill": {"min": 1, "max": 2}}, "disaggregation": {}, )" + requests + "}")),
             Catch::Contains("/serving/0/autoscale/decode: missing required field"));
  CHECK_THAT(error_of(scenario(R"({"model": "llama-3-8b", "autoscale": {"min": 1, "max": 2, "decode": {"min": 1, "max": 2}}, )" + requests + "}")),
             Catch::Contains("/serving/0/autoscale/decode: pools of prefill and decode replicas are a disaggregated deployment's"));
}

TEST_CASE("autoscaled prefill and decode pools beside random GPU failures serve every request over 20 seeds", "[serving][scenario][autoscale][faults][property]") {
  // Prefill replicas of TP 1 (one to three) and decode replicas of TP 2 (one or two), KV sent layer by layer, on one
  // HGX H100 whose GPUs fail every 40 s on average for 20 s: replicas go down mid-transfer, mid-drain and
  // mid-start-up. Every request is served in the end, each served one's KV moved at least once, no pool drains more
  // than it added, and the run is the same for the same seed. (The run ends with the last request, random failures
  // never running out, so replicas added may be left up.)
  const std::string pd = R"({"name": "pd", "model": "llama-3-8b", "router": "least-tokens", "disaggregation": {"decode_tp": 2, "kv_transfer": "by_layer"},
      "autoscale": {"prefill": {"min": 1, "max": 3}, "decode": {"min": 1, "max": 2}, "interval": "5 s"},
      "requests": {"rate": "25 /s", "count": 800, "prompt_tokens": {"uniform": [256, 4096]}, "output_tokens": {"uniform": [16, 512]}}})";
  const Scenario sc = parse_scenario(scenario(pd, R"(, "faults": {"gpu": {"mtbf": "40 s", "mttr": "20 s"}})"), "s.json", ".");
  std::uint64_t failures = 0, ups = 0, rerouted = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const RunResult run = simulate(sc, {.seed = seed});
    const ServingResult& r = run.summary.serving.front();
    CHECK(r.completed == 800);
    CHECK(r.kv_transfers >= r.completed);
    CHECK(r.scaled.downs <= r.scaled.ups);
    CHECK(r.decode_scaled.downs <= r.decode_scaled.ups);
    failures += r.replica_failures;
    rerouted += r.requests_rerouted;
    ups += r.scaled.ups + r.decode_scaled.ups;
    if (seed == 1) {
      const ServingResult again = simulate(sc, {.seed = seed}).summary.serving.front();
      CHECK(again.e2e_s.mean == r.e2e_s.mean);
      CHECK(again.kv_transfers == r.kv_transfers);
    }
  }
  CHECK(failures > 0);
  CHECK(rerouted > 0);
  CHECK(ups > 0);
}

TEST_CASE("a decode replica being drained decodes the KV caches sent to it before the drain, then parks", "[serving][scenario][autoscale]") {
  // One prefill replica and two decode replicas (the second added at once); KV caches go to the decode
  // replicas by hand, each at once, but those bound for the second are held back. It is drained at 1 s and
  // its held caches arrive at 10 s, long after it decoded the rest: it waits for them, decodes them there,
  // and parks. (It used to park as soon as it ran dry, the held caches then lost and prefilled again, and
  // caches waiting on it when the drain began were handed to the other decode replica without a transfer.)
  HandDriven engine(R"({"name": "pd", "model": "llama-3-8b", "disaggregation": {}, "autoscale": {"prefill": {"min": 1, "max": 1}, "decode": {"min": 1, "max": 2}, "interval": "10 s"},
      "requests": {"rate": "20 /s", "count": 40, "prompt_tokens": 512, "output_tokens": 256}})");
  std::vector<std::uint32_t> sent, held;  // requests whose KV is on its way
  std::uint64_t held_total = 0;
  engine.set.send_kv_with([&](const serving::KvTransfer& t) { (t.to == 2 ? held : sent).push_back(t.request); }, [](std::uint32_t, std::uint32_t) { return true; });
  engine.set.replica_up(2, 0.0);
  bool drained_yet = false;
  double released_s = -1;
  while (!engine.queue.empty() || !held.empty()) {
    if (!engine.queue.empty() && engine.queue.top().time_s < 10.0) {
      engine.run_until(engine.queue.top().time_s);
    } else {  // 10 s, or nothing else left to run: the held caches arrive
      held_total += held.size();
      released_s = engine.queue.now();
      std::vector<std::uint32_t> now;
      now.swap(held);
      for (std::uint32_t id : now) engine.set.kv_arrived(id);
      if (!engine.queue.empty()) engine.run_until(engine.queue.top().time_s);
    }
    if (!drained_yet && engine.queue.now() >= 1.0) {
      engine.set.drain(2);
      drained_yet = true;
    }
    std::vector<std::uint32_t> now;
    now.swap(sent);
    for (std::uint32_t id : now) engine.set.kv_arrived(id);
  }
  REQUIRE(held_total > 0);
  const ServingResult r = engine.set.summarize(engine.queue.now());
  CHECK(r.completed == 40);
  CHECK(r.requests_rerouted == 0);
  REQUIRE(engine.drained.size() == 1);
  CHECK(engine.drained.front().first == 2);
  CHECK(engine.drained.front().second > released_s);  // after decoding what arrived late
}

TEST_CASE("a GPU failure during a drain parks the replica and gives its GPUs back instead of restarting it", "[serving][scenario][autoscale][faults]") {
  // A second replica added at once, drained at 2 s while it still decodes, and one of its GPUs failing
  // then. It used to come back serving once repaired (the drain undone).
  HandDriven engine(R"({"name": "chat", "model": "llama-3-8b", "autoscale": {"min": 1, "max": 2, "interval": "10 s"},
      "requests": {"rate": "20 /s", "count": 200, "prompt_tokens": 512, "output_tokens": 256}})");
  engine.set.replica_up(1, 0.0);
  engine.run_until(2.0);
  REQUIRE(engine.set.load().serving == 2);
  engine.set.drain(1);
  REQUIRE(engine.set.load().serving == 1);
  REQUIRE(engine.drained.empty());  // it still holds requests
  engine.set.replica_down(1);
  CHECK(engine.drained == std::vector<std::pair<std::uint32_t, double>>{{1, engine.queue.now()}});  // at once
  CHECK(engine.set.load().parked == std::optional<std::uint32_t>{1});
  engine.run_until(std::numeric_limits<double>::infinity());
  const ServingResult r = engine.set.summarize(engine.queue.now());
  CHECK(r.completed == 200);
  CHECK(r.replica_failures == 1);
  CHECK(r.requests_rerouted > 0);
}

TEST_CASE("a replica of several lanes counts its time until its last lane parks", "[serving][scenario][autoscale][dp-attention]") {
  // Two data-parallel ranks a replica: the second replica, up from 0 s, drains at 2 s; its ranks finish
  // at different times, and its GPUs are held until the last has (it used to count each rank's half
  // until that rank parked).
  HandDriven engine(R"({"name": "moe", "model": "qwen3-30b-a3b", "tp": 2, "dp_attention": true, "autoscale": {"min": 1, "max": 2, "interval": "10 s"},
      "requests": {"rate": "40 /s", "count": 400, "prompt_tokens": {"uniform": [256, 1024]}, "output_tokens": {"uniform": [32, 512]}}})");
  engine.set.replica_up(1, 0.0);
  engine.run_until(2.0);
  engine.set.drain(1);
  engine.run_until(std::numeric_limits<double>::infinity());
  REQUIRE(engine.drained.size() == 1);
  const ServingResult r = engine.set.summarize(engine.queue.now());
  CHECK(r.completed == 400);
  CHECK(r.replica_s == Approx(engine.queue.now() + engine.drained.front().second).epsilon(1e-12));  // the first replica throughout, the second until drained
}

TEST_CASE("an autoscaled pipeline-parallel deployment adds and drains whole replicas, every lane together, on a node's worth of GPUs each", "[serving][scenario][pp][autoscale]") {
  // Llama 3 70B at TP 4 x PP 2 (8 GPUs, two lanes a replica) on three HGX H100s, one replica to start: a
  // burst fills its queue, so replicas are added on the free nodes, each taking a whole node's 8 GPUs, and
  // after the burst they drain (both lanes) and give the nodes back.
  const std::string burst = R"({"name": "chat", "model": "llama-3-70b", "tp": 4, "pp": 2, "router": "least-tokens", "autoscale": {"min": 1, "max": 3, "interval": "10 s"},
      "requests": {"rate": "30 /s", "count": 3000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 3}])";
  const Scenario sc = parse_scenario(scenario(burst, "", nodes), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 1);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  check_scaled(r, 3000, 2);
  CHECK(r.replica_s > 1.5 * r.makespan_s);
  // Against the one replica alone: the added ones cut the waiting.
  std::string fixed = burst;
  fixed.replace(fixed.find(R"("autoscale": {"min": 1, "max": 3, "interval": "10 s"},)"), 57, "");
  const ServingResult one = simulate(parse_scenario(scenario(fixed, "", nodes), "s.json", ".")).summary.serving.front();
  CHECK(r.ttft_s.p95 < one.ttft_s.p95);
  // Drained, the added replicas' 16 GPUs go back whole: 8-GPU gangs arriving long after the burst run on
  // nodes 1 and 2, the first replica keeping node 0.
  const std::string later = R"(, "workflows": {"eight": {"name": "eight", "tasks": [{"name": "a", "gpus": 8, "work": {"flop": "1000 PFLOP"}}]}},
      "workload": [{"workflow": "eight", "arrival": {"process": "times", "times": ["2 h", "2 h"]}}])";
  const RunResult after = simulate(parse_scenario(scenario(burst, later, nodes), "s.json", "."));
  const std::set<std::uint32_t> used = gpus_used(after);
  CHECK(used.size() == 16);
  CHECK(*used.begin() == 8);
  CHECK(after.summary.serving.front().scaled.downs == 2);
  // A replica larger than a node (TP 4 x PP 3: a node's 8 GPUs and 4 of another) is added piece by piece.
  std::string wide = burst;
  wide.replace(wide.find(R"("pp": 2)"), 7, R"("pp": 3)");
  const Scenario wide_sc = parse_scenario(scenario(wide, "", R"([{"type": "hgx-h100-8", "count": 5}])"), "s.json", ".");
  REQUIRE(wide_sc.serving[0]->placement.size() == 2);
  const RunResult wide_run = simulate(wide_sc);
  check_scaled(wide_run.summary.serving.front(), 3000, 2);
}

TEST_CASE("an autoscaled deployment whose TP group spans nodes adds and drains replicas of whole nodes", "[serving][scenario][autoscale]") {
  // Llama 3.1 405B at TP 16 (two HGX H100s a replica) on six nodes, one replica to start: a burst fills its queue,
  // so two replicas are added, each on two free nodes, and after the burst they drain and give the four back.
  const std::string burst = R"({"name": "big", "model": "llama-3.1-405b", "tp": 16, "router": "least-tokens", "autoscale": {"min": 1, "max": 3, "interval": "10 s"},
      "requests": {"rate": "20 /s", "count": 2000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 6}])";
  const Scenario sc = parse_scenario(scenario(burst, "", nodes), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 2);  // the first replica: two nodes' pieces
  CHECK(sc.serving[0]->placement[0].node != sc.serving[0]->placement[1].node);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  check_scaled(r, 2000, 2);
  CHECK(r.replica_s > 1.5 * r.makespan_s);
  // Drained, the added replicas' 32 GPUs go back whole: four 8-GPU gangs long after the burst run on nodes 2 to 5,
  // the first replica keeping nodes 0 and 1.
  const std::string later = R"(, "workflows": {"eight": {"name": "eight", "tasks": [{"name": "a", "gpus": 8, "work": {"flop": "1000 PFLOP"}}]}},
      "workload": [{"workflow": "eight", "arrival": {"process": "times", "times": ["2 h", "2 h", "2 h", "2 h"]}}])";
  const RunResult after = simulate(parse_scenario(scenario(burst, later, nodes), "s.json", "."));
  const std::set<std::uint32_t> used = gpus_used(after);
  CHECK(used.size() == 32);
  CHECK(*used.begin() == 16);
  CHECK(after.summary.serving.front().scaled.downs == 2);
}

TEST_CASE("a node autoscaler starts no node for a replica wider than the nodes it could start", "[serving][scenario][autoscale]") {
  // Llama 3.1 405B at TP 16 on three HGX H100s, its first replica on nodes 0 and 1, node 2 off: a second replica
  // would need two more nodes and the group has one. Starting it would do nothing but be drained idle and wanted
  // again, decision after decision.
  const std::string burst = R"({"name": "big", "model": "llama-3.1-405b", "tp": 16, "router": "least-tokens", "autoscale": {"min": 1, "max": 2, "interval": "10 s"},
      "requests": {"rate": "20 /s", "count": 2000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const std::string scaled = node_autoscaler(0);
  const RunResult run = simulate(parse_scenario(scenario(burst, scaled, R"([{"type": "hgx-h100-8", "count": 3}])"), "s.json", "."));
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 2000);
  CHECK(r.scaled.ups == 0);
  CHECK(r.scaled.ups_without_gpus > 0);
  CHECK(run.summary.nodes_started == 0);
  // With a fourth node the two it needs start, and the replica comes up on them.
  // And where one of them is on already, idle (three on at the start), it is kept for the replica while the other
  // starts: the one start is the whole of it.
  const std::string three_on = node_autoscaler(3);
  const RunResult held = simulate(parse_scenario(scenario(burst, three_on, R"([{"type": "hgx-h100-8", "count": 4}])"), "s.json", "."));
  CHECK(held.summary.serving.front().scaled.ups == 1);
  CHECK(held.summary.nodes_started == 1);
  const RunResult four = simulate(parse_scenario(scenario(burst, scaled, R"([{"type": "hgx-h100-8", "count": 4}])"), "s.json", "."));
  CHECK(four.summary.serving.front().scaled.ups == 1);
  CHECK(four.summary.nodes_started >= 2);
}

TEST_CASE("a node autoscaler starts a node for the decode pool of a disaggregated deployment, not for its prefill pool", "[serving][scenario][autoscale]") {
  // Llama 3 70B at TP 8 on three HGX H100s: the prefill replica on node 0, the decode replica on node 1, node 2 off.
  // Decode-bound requests (64-token prompts, 2,048-token outputs) fill the decode replica's batch; its pool wants a
  // second replica, which needs a whole node: node 2 starts and the replica comes up there.
  const std::string pd = R"({"name": "pd", "model": "llama-3-70b", "tp": 8, "router": "least-tokens", "disaggregation": {},
      "autoscale": {"prefill": {"min": 1, "max": 2}, "decode": {"min": 1, "max": 2}, "interval": "10 s"},
      "requests": {"rate": "12 /s", "count": 2000, "prompt_tokens": 64, "output_tokens": 2048}})";
  const std::string nodes = node_autoscaler(0);
  const RunResult run = simulate(parse_scenario(scenario(pd, nodes, R"([{"type": "hgx-h100-8", "count": 3}])"), "s.json", "."));
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 2000);
  CHECK(r.scaled.ups == 0);
  CHECK(r.scaled.ups_without_gpus == 0);
  CHECK(r.decode_scaled.ups == 1);
  CHECK(r.decode_scaled.ups_without_gpus > 0);  // wanted while node 2 was off or starting
  CHECK(run.summary.nodes_started == 1);
}

TEST_CASE("an autoscaled deployment with data-parallel attention adds and drains whole replicas, its ranks together", "[serving][scenario][dp-attention][autoscale]") {
  // Qwen3 30B-A3B with data-parallel attention over 2 GPUs (two ranks a replica, the experts spread over
  // them) on one HGX H100, one replica to start: a burst adds replicas of 2 GPUs, which drain (both ranks)
  // and give their GPUs back after it.
  const std::string burst = R"({"name": "moe", "model": "qwen3-30b-a3b", "tp": 2, "dp_attention": true, "router": "least-tokens",
      "autoscale": {"min": 1, "max": 3, "interval": "10 s"},
      "requests": {"rate": "60 /s", "count": 12000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const Scenario sc = parse_scenario(scenario(burst), "s.json", ".");
  REQUIRE(sc.serving[0]->placement.size() == 1);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  check_scaled(r, 12000, 2);
  CHECK(r.replica_s > 1.5 * r.makespan_s);
  CHECK(r.replica_s < 4 * r.makespan_s);  // three replicas at most: counted once a replica, not once a rank (that would be about 6)
  std::string fixed = burst;
  fixed.replace(fixed.find(R"("autoscale": {"min": 1, "max": 3, "interval": "10 s"},)"), 57, "");
  const ServingResult one = simulate(parse_scenario(scenario(fixed), "s.json", ".")).summary.serving.front();
  CHECK(r.ttft_s.p95 < one.ttft_s.p95);
  // Drained, the added replicas' GPUs go back: 1-GPU tasks long after the burst use all but the first two.
  const std::string later = R"(, "workflows": {"one": {"name": "one", "tasks": [{"name": "a", "gpus": 1, "work": {"flop": "1000 PFLOP"}}]}},
      "workload": [{"workflow": "one", "arrival": {"process": "times", "times": ["2 h", "2 h", "2 h", "2 h", "2 h", "2 h"]}}])";
  const RunResult after = simulate(parse_scenario(scenario(burst, later), "s.json", "."));
  const std::set<std::uint32_t> used = gpus_used(after);
  CHECK(used == std::set<std::uint32_t>{2, 3, 4, 5, 6, 7});
}

TEST_CASE("a node autoscaler beside serving keeps the replica's node on and scales the others for the tasks", "[serving][scenario][autoscale]") {
  // The chat replica on node 0's first GPU; 16 two-GPU gangs of 10 PFLOP each (seconds each); the autoscaler
  // starts with no node of its own on.
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 3}])";
  const std::string scaled = R"(, "workflows": {"w": {"name": "w", "tasks": [{"name": "a", "gpus": 2, "work": {"flop": "10 PFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 16}}], "autoscale": {"policy": "utilization", "target_utilization": 0.7, "min_nodes": 0, "initial_nodes": 0,
      "interval": "10 s", "provisioning": "30 s", "scale_in_window": "0 s"})";
  const Scenario sc = parse_scenario(scenario(kChat, scaled, nodes), "s.json", ".");
  const RunResult run = simulate(sc, {.record_link_samples = true});  // with the decision log
  REQUIRE(run.summary.serving.size() == 1);
  CHECK(run.summary.serving.front().completed == 400);
  CHECK(run.summary.workflows.completed == 16);
  CHECK(run.summary.nodes_started >= 1);  // nodes came up for the tasks
  int node_decisions = 0;
  for (const Decision& d : run.trace.decisions) {
    if (!d.node) continue;
    CHECK(index(*d.node) != 0);  // never started, drained or stopped: it serves throughout
    ++node_decisions;
  }
  CHECK(node_decisions > 0);
  CHECK(run.summary.node_s_on >= run.summary.end_s);  // node 0 on from start to end, the others while wanted
  CHECK(run.summary.node_s_on < 3 * run.summary.end_s);
  // Seven one-GPU tasks fit on the replica's node beside it: no node is started for them.
  const std::string beside = R"(, "workflows": {"w": {"name": "w", "tasks": [{"name": "a", "work": {"flop": "20 PFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 7}}], "autoscale": {"policy": "utilization", "target_utilization": 0.7,
      "min_nodes": 0, "initial_nodes": 0, "interval": "10 s", "provisioning": "30 s", "scale_in_window": "0 s"})";
  const RunResult fitting = simulate(parse_scenario(scenario(kChat, beside, nodes), "s.json", "."));
  CHECK(fitting.summary.workflows.completed == 7);
  CHECK(fitting.summary.end_s > 10);  // past the first decision
  CHECK(fitting.summary.nodes_started == 0);
}

TEST_CASE("a node autoscaler starts nodes for the replicas a deployment's own autoscaling wants", "[serving][scenario][autoscale]") {
  // TP 4 replicas of Llama 3 8B, 1 to 4 as the queue grows, on three HGX H100 nodes of which only the first
  // replica's is on at the start: node 0 holds two replicas; the other two need nodes the node autoscaler starts.
  const std::string burst = R"({"name": "chat", "model": "llama-3-8b", "tp": 4, "router": "least-tokens", "autoscale": {"min": 1, "max": 4, "interval": "10 s"},
      "requests": {"rate": "120 /s", "count": 12000, "prompt_tokens": {"uniform": [512, 2048]}, "output_tokens": {"uniform": [64, 256]}}})";
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 3}])";
  const std::string scaled = node_autoscaler(0);
  const RunResult fixed = simulate(parse_scenario(scenario(burst, "", nodes), "s.json", "."));
  const RunResult run = simulate(parse_scenario(scenario(burst, scaled, nodes), "s.json", "."));
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 12000);
  CHECK(fixed.summary.serving.front().scaled.ups == 3);
  CHECK(r.scaled.ups == 3);  // as on the fixed cluster, once the nodes are up
  CHECK(r.scaled.ups_without_gpus > 0);  // asked for while the nodes came up
  CHECK(run.summary.nodes_started >= 1);
  CHECK(run.summary.node_s_on < 3 * run.summary.end_s);  // not every node for the whole run
}

TEST_CASE("an idle node of another type left on does not stand in for the node a wanted replica needs", "[serving][scenario][autoscale]") {
  // Llama 3 8B at TP 4 on the first HGX H100 and on the HGX H200, a TP 8 chat deployment on two HGX A100s (one
  // replica to start), and one 8-GPU task at the start, run on the second H100 (on from the start). The task ends
  // in seconds, and the chat deployment wants its second replica at the first decisions (10 s): three nodes pinned
  // by replicas and one for the replica wanted are four nodes wanted, as many as are on. The idle H100 used to
  // stand in for the A100 the replica needs: nothing started or drained, and the replica never came. Now the A100
  // starts and the idle H100 drains, in the same decision.
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 2}, {"type": "hgx-h200-8", "count": 1}, {"type": "hgx-a100-8", "count": 2}])";
  const std::string rest = R"(, "workflows": {"w": {"name": "w", "tasks": [{"name": "a", "gpus": 8, "work": {"flop": "20 PFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once", "count": 1}}],
      "autoscale": {"policy": "utilization", "target_utilization": 1.0, "min_nodes": 0, "initial_nodes": 2,
      "interval": "10 s", "provisioning": "30 s", "scale_in_window": "1 h"})";
  const RunResult run = simulate(parse_scenario(scenario(light_on("a", "hgx-h100-8") + ", " + light_on("b", "hgx-h200-8") + ", " + kA100Chat, rest, nodes), "s.json", "."),
                                 {.record_link_samples = true});  // with the decision log
  REQUIRE(run.summary.workflows.completed == 1);
  REQUIRE(run.trace.instances.size() == 1);
  CHECK(run.trace.instances.front().end_s < 10);  // done before the first decisions
  const ServingResult& r = run.summary.serving.back();
  REQUIRE(r.deployment->name == "chat");
  CHECK(r.completed == 6000);
  CHECK(r.scaled.ups >= 1);
  CHECK(run.summary.nodes_started == 1);
  std::vector<double> started_a100, drained_h100;
  for (const Decision& d : run.trace.decisions) {
    if (!d.node) continue;
    if (d.kind == DecisionKind::node_started && index(*d.node) == 4) started_a100.push_back(d.time_s);
    if (d.kind == DecisionKind::node_draining && index(*d.node) == 1) drained_h100.push_back(d.time_s);
  }
  REQUIRE(started_a100.size() == 1);
  REQUIRE(drained_h100.size() == 1);
  CHECK(started_a100.front() == drained_h100.front());
}

TEST_CASE("GPU busy time grows with the horizon, even where the run stops during a swap's copies", "[serving][scenario]") {
  // Preempted requests swap their KV out and back in; an iteration's copies come before its forward pass and
  // count apart from it. Stopped every 0.1 ms across the run's first swap (copies of about 0.6 ms starting near
  // 161 ms), the busy time counted can only grow: counting the copies' remainder twice made it drop there.
  const std::string swapping = R"({"name": "swap", "model": "llama-3-8b", "knobs": {"gpu_memory_utilization": 0.24, "preemption": "swap"},
                                  "requests": {"count": 64, "prompt_tokens": 300, "output_tokens": 300}})";
  const auto stopped_at = [&](double h) {
    char horizon[64];
    std::snprintf(horizon, sizeof horizon, R"(, "horizon": "%.17g s")", h);
    return simulate(parse_scenario(scenario(swapping, horizon), "s.json", ".")).summary;
  };
  const Summary first = stopped_at(0.1595), last = stopped_at(0.1645);
  REQUIRE(first.serving.front().busy.swap_s < last.serving.front().busy.swap_s);  // a swap starts in the window
  double previous = first.gpu_busy_s;
  for (int k = 1; k <= 50; ++k) {
    const double h = 0.1595 + 1e-4 * k;
    const Summary s = stopped_at(h);
    CHECK(s.gpu_busy_s >= previous - 1e-12);
    CHECK(s.gpu_busy_s <= h + 1e-12);  // one GPU, never busier than the time
    previous = s.gpu_busy_s;
  }
}

TEST_CASE("a replica wanted by its deployment's autoscaling gets a node even where other replicas' nodes have as many GPUs free, scattered", "[serving][scenario][autoscale]") {
  // Llama 3 8B at TP 4 on one HGX H100 and one HGX H200 (4 GPUs free on each, kept on by their replicas),
  // and a TP 8 chat deployment on two HGX A100s, one replica to start: its second replica needs the other A100
  // node. The 8 free GPUs elsewhere cannot hold it; the node autoscaler used to count them against its
  // demand and never started the node.
  const std::string nodes = R"([{"type": "hgx-h100-8", "count": 1}, {"type": "hgx-h200-8", "count": 1}, {"type": "hgx-a100-8", "count": 2}])";
  const std::string scaled = R"(, "autoscale": {"policy": "utilization", "target_utilization": 1.0, "min_nodes": 0, "initial_nodes": 0,
      "interval": "10 s", "provisioning": "30 s", "scale_in_window": "0 s"})";
  const RunResult run = simulate(parse_scenario(scenario(light_on("a", "hgx-h100-8") + ", " + light_on("b", "hgx-h200-8") + ", " + kA100Chat, scaled, nodes), "s.json", "."));
  const ServingResult& r = run.summary.serving.back();
  REQUIRE(r.deployment->name == "chat");
  CHECK(r.completed == 6000);
  CHECK(r.scaled.ups_without_gpus > 0);  // asked for while the node came up
  CHECK(r.scaled.ups >= 1);
  CHECK(run.summary.nodes_started >= 1);
  // The same on one node type: replicas of TP 2 x PP 3 leave 2 GPUs free on each of four A100 nodes (8 in
  // all, none able to hold a TP 8 replica); the sixth node, off, is started for the second chat replica.
  const std::string staged = R"({"name": "a", "model": "llama-3-8b", "tp": 2, "pp": 3, "replicas": 4, "nodes": "hgx-a100-8",
      "requests": {"rate": "1 /s", "count": 50, "prompt_tokens": 256, "output_tokens": 32}})";
  const RunResult same = simulate(parse_scenario(scenario(staged + ", " + kA100Chat, scaled, R"([{"type": "hgx-a100-8", "count": 6}])"), "s.json", "."));
  const ServingResult& c = same.summary.serving.back();
  CHECK(c.completed == 6000);
  CHECK(c.scaled.ups >= 1);
  CHECK(same.summary.nodes_started == 1);
  // An H100 node off before the A100 node off: the node started for the chat replica is the A100 (the first
  // node off in the cluster's order used to be started, where the replica could never run).
  const std::string before = R"([{"type": "hgx-h100-8", "count": 2}, {"type": "hgx-h200-8", "count": 1}, {"type": "hgx-a100-8", "count": 2}])";
  const RunResult ordered = simulate(parse_scenario(scenario(light_on("a", "hgx-h100-8") + ", " + light_on("b", "hgx-h200-8") + ", " + kA100Chat, scaled, before), "s.json", "."));
  CHECK(ordered.summary.serving.back().completed == 6000);
  CHECK(ordered.summary.serving.back().scaled.ups >= 1);
  CHECK(ordered.summary.nodes_started == 1);
}
