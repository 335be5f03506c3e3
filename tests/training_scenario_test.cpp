// Training jobs inside a scenario: alone on one switch an iteration takes what `train` says; two
// data-parallel jobs whose gradient all-reduces cross one spine slow each other by what max-min sharing
// of that spine predicts (worked by hand below); bad jobs are refused with the file and field.
#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "fleetsim/catalog.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/plan.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/training.hpp"
#include "helpers.hpp"
#include "run/recovery.hpp"

using namespace fleetsim;

namespace {

std::string job(const std::string& name, const std::string& parallel, const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": )" + parallel +
         R"(, "batch": {"global": 16})" + extra + "}";
}

std::string scenario(const std::string& cluster, const std::string& tenants, const std::string& workload) {
  return R"({"name": "t", "cluster": )" + cluster + (tenants.empty() ? "" : R"(, "tenants": )" + tenants) + R"(, "workload": )" + workload + "}";
}

const std::string kOneSwitch = R"({"nodes": [{"type": "hgx-h100-8", "count": 2}]})";

std::string error_of(const std::string& json) {
  try {
    parse_scenario(json, "s.json", test::source_dir() + "/scenarios");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const TrainingIteration& iteration_of(const Scenario& sc, std::size_t workflow = 0) { return *sc.workflows.at(workflow).tasks.front().training; }

}  // namespace

TEST_CASE("a training job alone in a scenario takes train's iteration, pipeline and optimizer included", "[training][scenario]") {
  // No data parallelism: the iteration is all compute, timed by the training model exactly as `train` times it.
  const std::string parallel = R"({"tp": 4, "pp": 2})";
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("solo", parallel) + R"(, "iterations": 3}])"), "s.json", ".");
  const RunResult run = simulate(sc);
  REQUIRE(run.summary.training.size() == 1);
  const TrainingResult& r = run.summary.training.front();
  CHECK(r.completed == 3);
  CHECK(r.iteration->gpus == 8);
  const TrainingJob alone = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": )" +
                                                   parallel + R"(, "batch": {"global": 16}})",
                                               "solo.json");
  const TrainingStep step = simulate_training_step(alone);
  // Event times are whole nanoseconds: the run's iterations may differ from train's by that rounding.
  CHECK(r.iteration_s.mean == Approx(step.iteration_s).epsilon(1e-6));
  CHECK(r.alone_s == Approx(step.iteration_s).epsilon(1e-12));
  CHECK(r.mfu == Approx(step.mfu).epsilon(1e-6));
  CHECK(r.slowdown == Approx(1).epsilon(1e-6));
  CHECK(r.gpu == "h100-sxm");
  // Its stage sends run on the shared network too, beside the compute that holds their time (so the
  // iteration above is still train's): the pairs of the two stages (TP ranks 4 apart), each way once a
  // micro-batch, each TP rank its share of the boundary's activations.
  const TrainingIteration& it = iteration_of(sc);
  const TrainingCounts c = count_training(alone);
  CHECK(it.pp_calls == 16);
  CHECK(it.pp_bytes == Approx(16 * c.pp_send_bytes / 4).epsilon(1e-12));
  const std::vector<CollectiveSpec>& collectives = sc.workflows.front().tasks.front().collectives;
  REQUIRE(collectives.size() == 2);  // and TP's all-reduces, for TP groups split across nodes only
  CHECK(collectives[0].op == CollectiveOp::send_recv);
  CHECK(collectives[0].group_size == 2);
  CHECK(collectives[0].group_stride == 4);
  CHECK(collectives[0].group_offset == 0);
  CHECK(collectives[0].overlap == 1);
  CHECK(collectives[1].split_groups_only);
}

TEST_CASE("a pipeline's stage sends run as two sets of pairs, the even boundaries and the odd", "[training][scenario]") {
  // TP 2 x PP 4 on one node: stages of 2 GPUs; the pairs (0, 2), (1, 3), (4, 6), (5, 7) carry boundaries 0-1 and
  // 2-3, the pairs from rank 2 on, (2, 4) and (3, 5), boundary 1-2.
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("pp", R"({"tp": 2, "pp": 4})") + R"(, "iterations": 2}])"), "s.json", ".");
  const std::vector<CollectiveSpec>& collectives = sc.workflows.front().tasks.front().collectives;
  REQUIRE(collectives.size() == 3);  // and TP's all-reduces, for TP groups split across nodes only
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(collectives[k].group_size == 2);
    CHECK(collectives[k].group_stride == 2);
  }
  CHECK(collectives[0].group_offset == 0);
  CHECK(collectives[1].group_offset == 2);
  const RunResult run = simulate(sc);
  const TrainingResult& r = run.summary.training.front();
  CHECK(r.completed == 2);
  CHECK(r.iteration_s.mean == Approx(r.alone_s).epsilon(1e-6));  // hidden behind the compute, alone
}

TEST_CASE("context parallelism's ring passes run on the shared network: across nodes they load the NICs and hide behind the compute", "[training][scenario]") {
  // TP 8 x CP 2 on two nodes: the CP pairs are ranks 8 apart, one on each node. Each of the 32 layers, each of the
  // 16 micro-batches: one ring pass forward, two backward, each a ring all-gather of the two ranks' blocks.
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("cp", R"({"tp": 8, "cp": 2})") + R"(, "iterations": 2}])"), "s.json", ".");
  const TrainingIteration& it = iteration_of(sc);
  const TrainingCounts c = count_training(parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"tp": 8, "cp": 2}, "batch": {"global": 16}})", "cp.json"));
  CHECK(it.cp_calls == 3 * 16 * 32);
  // Full recomputation runs each layer's forward ring again in the backward.
  const Scenario full = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("cp", R"({"tp": 8, "cp": 2})", R"(, "recompute": "full")") + R"(, "iterations": 1}])"), "s.json", ".");
  CHECK(iteration_of(full).cp_calls == 4 * 16 * 32);
  CHECK(it.cp_bytes == Approx(it.cp_calls * 2 * c.cp_send_bytes).epsilon(1e-12));
  const std::vector<CollectiveSpec>& collectives = sc.workflows.front().tasks.front().collectives;
  const auto ring = std::find_if(collectives.begin(), collectives.end(), [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_gather; });
  REQUIRE(ring != collectives.end());
  CHECK(ring->algo == CollectiveAlgo::ring);
  CHECK(ring->group_size == 2);
  CHECK(ring->group_stride == 8);
  CHECK(ring->overlap == 1);
  // The same run without them: the iteration is the same (alone they hide), the NICs carry less.
  Scenario without = sc;
  auto& kept = without.workflows.front().tasks;
  for (TaskSpec& t : kept) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_gather; });
  const RunResult with_rings = simulate(sc), no_rings = simulate(without);
  REQUIRE(with_rings.summary.training.front().completed == 2);
  CHECK(with_rings.summary.training.front().iteration_s.mean == Approx(no_rings.summary.training.front().iteration_s.mean).epsilon(1e-6));
  // Each of the 16 GPUs sends (cp - 1) / cp of its passes' bytes to the other node each iteration, over two NIC
  // links (its node's up, the other's down): 2 iterations x 16 x cp_bytes / 2 x 2.
  CHECK(with_rings.summary.nic_bytes - no_rings.summary.nic_bytes == Approx(2 * 16 * (it.cp_bytes / 2) * 2).epsilon(1e-6));
}

TEST_CASE("DualPipe in a scenario: the two GPUs holding the same two stages reduce their gradients together on the shared network", "[training][scenario][dualpipe]") {
  // TP 8 x PP 2 under DualPipe, no DP, on two HGX H100s: GPU r of the first node holds stages 0 and 1, as does GPU
  // r of the second (the other direction's), so each pair (r, r + 8) all-reduces a GPU's gradients B: a two-rank
  // ring sends B each way, through each GPU's own NIC, after the last backward. Alone the iteration is the
  // compute and that reduction, as train has it; the NICs carry 16 GPUs x B x 2 links (a node's up, the other's down) an iteration.
  const std::string parallel = R"({"tp": 8, "pp": 2})", extra = R"(, "schedule": "dualpipe")";
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("dual", parallel, extra) + R"(, "iterations": 2}])"), "s.json", ".");
  const TrainingIteration& it = iteration_of(sc);
  const TrainingJob alone = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": )" +
                                                   parallel + R"(, "batch": {"global": 16})" + extra + "}",
                                               "dual.json");
  const TrainingCounts c = count_training(alone);
  CHECK(it.dp_bytes == c.dp_allreduce_bytes[0]);
  CHECK(it.dp_bytes == Approx(2 * 8.03e9 / 8).epsilon(0.01));  // both stages: the whole model's 16-bit gradients over TP 8
  const std::vector<CollectiveSpec>& collectives = sc.workflows.front().tasks.front().collectives;
  REQUIRE(!collectives.empty());
  CHECK(collectives[0].op == CollectiveOp::all_reduce);
  CHECK(collectives[0].group_size == 1);
  CHECK(collectives[0].group_stride == 8);
  CHECK(collectives[0].mirrored);
  const RunResult run = simulate(sc);
  REQUIRE(run.summary.training.size() == 1);
  const TrainingResult& r = run.summary.training.front();
  CHECK(r.completed == 2);
  const double nic = sc.cluster.groups[0].nic.bandwidth_Bps;
  const TrainingStep step = simulate_training_step(alone);
  // The exposed reduction is train's for these pairs, and B over one NIC plus the collective model's latencies
  // and protocol (4% here).
  const double exposed = r.iteration_s.mean - it.on.front().compute_s;
  CHECK(exposed == Approx(step.dp_allreduce_s).epsilon(1e-6));
  CHECK(exposed > it.dp_bytes / nic);
  CHECK(exposed < 1.05 * it.dp_bytes / nic);
  CHECK(r.iteration_s.mean == Approx(step.iteration_s).epsilon(1e-6));
  Scenario without = sc;
  for (TaskSpec& t : without.workflows.front().tasks) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_reduce; });
  CHECK(run.summary.nic_bytes - simulate(without).summary.nic_bytes == Approx(2 * 16 * it.dp_bytes * 2).epsilon(1e-6));
  // PP 4 (TP 4): the first stage's GPUs (ranks 0-3, the first node) pair with the last's (12-15, the second), the
  // second's (4-7) with the third's (8-11): every pair crosses the nodes, each GPU sending its own two stages'
  // gradients: the end pair's hold the embedding and the head beside their 16 layers, the middle pair's 16 layers
  // alone (Llama 3 8B: 1.05 B parameters beside 3.49 B, some 30% more). Each group used to carry the largest's.
  const Scenario four = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("dual", R"({"tp": 4, "pp": 4})", extra) + R"(, "iterations": 1}])"),
                                       "s.json", ".");
  Scenario four_without = four;
  for (TaskSpec& t : four_without.workflows.front().tasks) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_reduce; });
  const TrainingIteration& four_it = iteration_of(four);
  REQUIRE(four_it.dp_stage_bytes.size() == 4);
  const double ends = four_it.dp_stage_bytes[0], middle = four_it.dp_stage_bytes[1];
  CHECK(four_it.dp_stage_bytes[3] == ends);
  CHECK(four_it.dp_stage_bytes[2] == middle);
  CHECK(ends == four_it.dp_bytes);
  CHECK(ends / middle > 1.25);
  CHECK(ends / middle < 1.35);
  CHECK(simulate(four).summary.nic_bytes - simulate(four_without).summary.nic_bytes == Approx(8 * ends * 2 + 8 * middle * 2).epsilon(1e-6));
  // With DP 2 (TP 4): each group is a TP rank's four GPUs, its two DP ranks of each stage pair: ranks r, r + 4,
  // r + 8 and r + 12, two on each node.
  const Scenario dp = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("dual", R"({"tp": 4, "pp": 2, "dp": 2})", extra) + R"(, "iterations": 1}])"),
                                     "s.json", ".");
  const CollectiveSpec& grouped = dp.workflows.front().tasks.front().collectives.front();
  CHECK(grouped.group_size == 2);
  CHECK(grouped.group_stride == 4);
  CHECK(grouped.mirrored);
  const RunResult dp_run = simulate(dp);
  CHECK(dp_run.summary.training.front().iteration_s.mean == Approx(dp_run.summary.training.front().alone_s).epsilon(0.03));
}

TEST_CASE("a data-parallel job alone on one switch comes within 5% of train's iteration", "[training][scenario]") {
  // Its gradient all-reduce runs on the scenario's network (flows, max-min), train's on the collective
  // model's analytical time: the two agree closely where nothing else shares the links.
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("dp", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 2}])"), "s.json", ".");
  const RunResult run = simulate(sc);
  const TrainingResult& r = run.summary.training.at(0);
  REQUIRE(r.completed == 2);
  CHECK(r.iteration_s.mean == Approx(r.alone_s).epsilon(0.05));
  CHECK(r.iteration_s.mean > iteration_of(sc).on.front().compute_s);
}

TEST_CASE("two data-parallel jobs across one spine slow each other by the spine's max-min share", "[training][scenario]") {
  // Four HGX H100 nodes, two a leaf, the leaves' uplinks 4:1 oversubscribed onto one spine. Job a runs on
  // n0 and n2, job b on n1 and n3: each is TP 8 inside a node and DP 2 across the leaves, so each of its 8
  // DP groups (one per rail) all-reduces B bytes between its two ranks, and a two-rank ring sends B each
  // way. Alone, a job's 8 B cross its leaf's uplink each way at U bytes/s: 8 B / U. Both at once (the jobs
  // are identical and start together, so their reductions coincide), the spine is shared evenly: each
  // takes 16 B / U. The iteration grows by 8 B / U and by nothing else.
  const std::string cluster = R"({"nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 4, "spines": 1}})";
  const std::string tenants = R"([{"name": "a", "nodes": ["n0", "n2"]}, {"name": "b", "nodes": ["n1", "n3"]}])";
  const std::string a = R"({"tenant": "a", "training": )" + job("a", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 4})";
  const std::string b = R"({"tenant": "b", "training": )" + job("b", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 4})";
  const Scenario one = parse_scenario(scenario(cluster, tenants, "[" + a + "]"), "one.json", ".");
  const Scenario two = parse_scenario(scenario(cluster, tenants, "[" + a + ", " + b + "]"), "two.json", ".");
  const RunResult alone = simulate(one), shared = simulate(two);
  REQUIRE(shared.summary.training.size() == 2);
  const double bytes = iteration_of(one).dp_bytes;
  CHECK(bytes == Approx(2 * 8.03e9 / 8).epsilon(0.01));  // Llama 3 8B's 16-bit weights over TP 8
  const double uplink = 2 * 8 * one.cluster.groups[0].nic.bandwidth_Bps / 4;
  const double compute = iteration_of(one).on.front().compute_s;
  CHECK(alone.summary.training[0].iteration_s.mean - compute == Approx(8 * bytes / uplink).epsilon(0.03));
  for (const TrainingResult& r : shared.summary.training) {
    CHECK(r.completed == 4);
    CHECK(r.iteration_s.mean - alone.summary.training[0].iteration_s.mean == Approx(8 * bytes / uplink).epsilon(1e-3));
  }
}

TEST_CASE("an FSDP job in a scenario moves its gathers and reduce-scatters on the shared network beside its passes", "[training][scenario][fsdp]") {
  // Llama 3 8B under FSDP over 16 H100s: each step gathers every layer's weights twice and reduce-scatters
  // its gradients once, 3 (n - 1) / n of the 16-bit weights a GPU: an all-reduce of 1.5 times them, in
  // three calls a layer, beside the forward and backward passes (timed as ZeRO-2's, without the gathers).
  const std::string fsdp = job("f", R"({"dp": 16, "zero": 3})");
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + fsdp + R"(, "iterations": 3}])"), "s.json", ".");
  const TrainingIteration& it = iteration_of(sc);
  CHECK(it.dp_bytes == Approx(1.5 * 2 * 8.03e9).epsilon(0.01));
  CHECK(it.dp_calls == 3 * 32);
  CHECK(it.dp_overlap > 0.5);
  const std::string zero2 = job("f", R"({"dp": 16, "zero": 2})");
  const Scenario sc2 = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + zero2 + R"(, "iterations": 3}])"), "s.json", ".");
  CHECK(it.on.front().compute_s == Approx(iteration_of(sc2).on.front().compute_s).epsilon(1e-12));
  CHECK(it.memory_per_gpu_bytes < iteration_of(sc2).memory_per_gpu_bytes);
  const RunResult run = simulate(sc);
  const TrainingResult& r = run.summary.training.at(0);
  REQUIRE(r.completed == 3);
  CHECK(r.iteration_s.mean >= it.on.front().compute_s);
  // train's FSDP iteration (gathers hidden layer by layer) against the scenario's (hidden over the passes).
  CHECK(r.iteration_s.mean == Approx(r.alone_s).epsilon(0.15));
  CHECK_THAT(sc.workflows.front().assumptions.back(), Catch::Contains("FSDP gathers and reduce-scatters") && Catch::Contains("96 calls"));
  // torchtitan's eager layer: FSDP2 copies each gathered layer out of its buffer on the compute stream, so the
  // compute timed for the scenario keeps those copies, which ZeRO-2's has not.
  const auto eager = [&](const std::string& parallel) {
    return iteration_of(parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("e", parallel, R"(, "runtime": "torchtitan")") + R"(, "iterations": 3}])"),
                                       "s.json", "."))
        .on.front()
        .compute_s;
  };
  const double eager_fsdp = eager(R"({"dp": 16, "zero": 3})"), eager_zero2 = eager(R"({"dp": 16, "zero": 2})");
  const TrainingJob fsdp_alone = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": {"dp": 16, "zero": 3},
      "batch": {"global": 16}, "runtime": "torchtitan"})", "e.json");
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  double copy_out = 0;
  for (const KernelCall& c : operation_kernels(torchtitan_profile(), "fsdp_copy_out", fsdp_alone.model.layer_parameters() / 4096, 4096, Dtype::bf16)) {
    copy_out += model.estimate(c, Dtype::bf16).time_s();
  }
  CHECK(eager_fsdp - eager_zero2 == Approx(2 * 32 * copy_out).epsilon(1e-6));  // one micro-batch: each layer's forward and backward
  // Across one spine, 8:1 oversubscribed (a leaf's uplinks 100 GB/s): one job's gathers cross it behind its
  // compute; two jobs' halve each other's share and no longer hide, so both steps stretch.
  const std::string cluster = R"({"nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 8, "spines": 1}})";
  const std::string tenants = R"([{"name": "a", "nodes": ["n0", "n2"]}, {"name": "b", "nodes": ["n1", "n3"]}])";
  const std::string a = R"({"tenant": "a", "training": )" + job("a", R"({"dp": 16, "zero": 3})") + R"(, "iterations": 4})";
  const std::string b = R"({"tenant": "b", "training": )" + job("b", R"({"dp": 16, "zero": 3})") + R"(, "iterations": 4})";
  const RunResult one = simulate(parse_scenario(scenario(cluster, tenants, "[" + a + "]"), "one.json", "."));
  const RunResult two = simulate(parse_scenario(scenario(cluster, tenants, "[" + a + ", " + b + "]"), "two.json", "."));
  CHECK(one.summary.training.at(0).iteration_s.mean == Approx(it.on.front().compute_s).epsilon(0.01));
  for (const TrainingResult& shared : two.summary.training) {
    CHECK(shared.completed == 4);
    CHECK(shared.iteration_s.mean > 1.3 * one.summary.training.at(0).iteration_s.mean);
  }
}

TEST_CASE("a training job file for train runs in a scenario on the scenario's cluster", "[training][scenario]") {
  // dp-1.3b.json names a cluster of 8 HGX nodes; the scenario's single node is what it runs on.
  const Scenario sc = parse_scenario(scenario(R"({"nodes": [{"type": "hgx-a100-8", "count": 1}]})", "",
                                              R"([{"training": "training/dp-1.3b.json", "iterations": 2, "arrival": {"process": "once", "start": "10 s"}}])"),
                                     "s.json", test::source_dir() + "/scenarios");
  REQUIRE(sc.workflows.size() == 1);
  CHECK(sc.workflows[0].id == "training:gpt-1.3b-data-parallel");
  CHECK(iteration_of(sc).on.front().gpu == "a100-sxm-80gb");
  const RunResult run = simulate(sc);
  CHECK(run.summary.training.at(0).completed == 2);
  CHECK(run.summary.makespan_s > 10);
}

TEST_CASE("training jobs in a scenario that cannot run are refused with the file and field", "[training][scenario]") {
  auto entry = [&](const std::string& body) { return scenario(kOneSwitch, "", "[" + body + "]"); };
  CHECK_THAT(error_of(entry(R"({"training": )" + job("t", R"({"tp": 3})") + R"(, "iterations": 1})")),
             Catch::Contains("/workload/0/training/parallel/tp: expected a divisor of the 32 heads, found 3"));
  CHECK_THAT(error_of(entry(R"({"training": )" + job("n", R"({"tp": 8, "dp": 2})") + "}")), Catch::Contains("/workload/0/iterations: missing required field"));
  CHECK_THAT(error_of(entry(R"({"training": )" + job("n", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 0})")), Catch::Contains("/workload/0/iterations"));
  CHECK_THAT(error_of(entry(R"({"training": )" + job("n", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 100001})")), Catch::Contains("/workload/0/iterations"));
  CHECK_THAT(error_of(entry(R"({"training": {"model": {"architecture": "llama-3-8b", "seq_len": 64}, "parallel": {}, "batch": {"global": 1}}, "iterations": 1})")),
             Catch::Contains("/workload/0/training: missing \"name\""));
  CHECK_THAT(error_of(entry(R"({"training": )" + job("n", R"({"tp": 8, "dp": 2})", R"(, "colour": 1)") + R"(, "iterations": 1})")),
             Catch::Contains("/workload/0/training/colour"));
  CHECK_THAT(error_of(entry(R"({"training": 7, "iterations": 1})")), Catch::Contains("/workload/0/training: expected a training job file path or an inline training job object"));
  CHECK_THAT(error_of(entry(R"({"training": "training/none.json", "iterations": 1})")), Catch::Contains("/workload/0/training: cannot use"));
  CHECK_THAT(error_of(entry(R"({"training": )" + job("n", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 1, "workflow": "x"})")),
             Catch::Contains("/workload/0/workflow: expected a training job or a workflow, not both"));
  const std::string twice = R"({"training": )" + job("same", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 1})";
  CHECK_THAT(error_of(entry(twice + ", " + twice)), Catch::Contains("/workload/1/training: a second training job named \"same\""));
  // A gang larger than the cluster, refused before anything is timed (at 2^36 GPUs, past what an int holds).
  CHECK_THAT(error_of(entry(R"({"training": )" + job("big", R"({"tp": 8, "dp": 4})") + R"(, "iterations": 1})")),
             Catch::Contains("/workload/0/training/parallel: tp x cp x pp x dp = 32 GPUs, more than the cluster's 16"));
  CHECK_THAT(error_of(entry(R"({"training": {"name": "huge", "model": {"layers": 65536, "hidden": 65536, "heads": 65536, "vocab": 8, "seq_len": 8},
      "parallel": {"tp": 65536, "pp": 65536, "dp": 16}, "batch": {"global": 16}}, "iterations": 1})")),
             Catch::Contains("tp x cp x pp x dp = 68,719,476,736 GPUs, more than the cluster's 16"));
  CHECK_THAT(error_of(entry(R"({"training": "training/gpt-13b-hybrid.json", "iterations": 1})")),
             Catch::Contains("s.json: /workload/0/training: tp x cp x pp x dp = 64 GPUs, more than the cluster's 16"));
  // DualPipe as train refuses it: an odd number of stages.
  CHECK_THAT(error_of(entry(R"({"training": )" + job("dual", R"({"pp": 3})", R"(, "schedule": "dualpipe")") + R"(, "iterations": 1})")),
             Catch::Contains("/workload/0/training/parallel/pp: expected an even number of pipeline stages with dualpipe, found 3"));
  // ZeRO-3's copies up from host memory, likewise.
  CHECK_THAT(error_of(entry(R"({"training": )" + job("infinity", R"({"dp": 16, "zero": 3, "offload_parameters": true})",
                                                     R"(, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"})") + R"(, "iterations": 1})")),
             Catch::Contains("/workload/0/training/parallel/offload_parameters: expected no parameter offload for a job inside a scenario"));
  // A job no GPU of the cluster can hold: the stage and the bytes it lacks, as train says it.
  CHECK_THAT(error_of(entry(R"({"training": {"name": "oom", "model": {"architecture": "llama-3-70b", "seq_len": 8192}, "parallel": {"dp": 2}, "batch": {"global": 2}}, "iterations": 1})")),
             Catch::Contains("/workload/0/training/parallel: stage 0 needs 1.32 TB a GPU (weights, gradients, optimizer state, activations), 1.24 TB more than the cluster's largest GPU (80 GB)"));
}

TEST_CASE("a scenario with training jobs gives the same summary on every run", "[training][scenario]") {
  const std::string cluster = R"({"nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 4}})";
  const std::string workload = R"([{"training": )" + job("a", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 3}, {"training": )" + job("b", R"({"tp": 4, "dp": 4})") +
                               R"(, "iterations": 3, "arrival": {"process": "once", "start": "100 ms"}}])";
  const Scenario sc = parse_scenario(scenario(cluster, "", workload), "s.json", ".");
  const RunResult first = simulate(sc), second = simulate(sc);
  REQUIRE(first.summary.training.size() == 2);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(first.summary.training[k].iteration_s.mean == second.summary.training[k].iteration_s.mean);
    CHECK(first.summary.training[k].iteration_s.max == second.summary.training[k].iteration_s.max);
  }
  CHECK(first.summary.makespan_s == second.summary.makespan_s);
}

TEST_CASE("a plan over a scenario with a training job fails the node counts its gang does not fit", "[training][scenario][plan]") {
  // TP 8 x DP 2: 16 GPUs, two HGX nodes. One node is a failing point that says why; two run it.
  const PlanResult result = test::plan_over_node_counts(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "workload": [{"training": )" +
                                                            job("j", R"({"tp": 8, "dp": 2})") +
                                                            R"(, "iterations": 2}], "slos": [{"metric": "latency_p95", "target": "1 min"}]})",
                                                        "hgx-h100-8", 3);
  const auto at = [&](int nodes) {
    const PlanPoint* p = test::searched_point(result, nodes);
    REQUIRE(p != nullptr);
    return *p;
  };
  CHECK_FALSE(at(1).passes);
  CHECK_THAT(at(1).verdict, Catch::StartsWith("does not fit 1 x hgx-h100-8: tp x cp x pp x dp = 16 GPUs, more than the cluster's 8"));
  CHECK(at(1).gpus == 8);
  CHECK(at(2).passes);
  REQUIRE(result.loads.size() == 1);
  REQUIRE(result.loads[0].point.has_value());
  CHECK(result.points[*result.loads[0].point].nodes == 2);
}

TEST_CASE("a mixture of experts in a scenario: its all-to-alls with the compute, its expert gradients in the DP reduction at their own group's bytes", "[training][scenario][moe]") {
  // Mixtral 8x7B on 16 GPUs: TP 2 x DP 8, EP 4, so each expert share lives on 8 x 2 / (2 x 4) = 2 GPUs.
  const std::string mixtral = R"({"name": "moe", "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 4, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full"})";
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + mixtral + R"(, "iterations": 2}])"), "s.json", ".");
  const TrainingIteration& it = iteration_of(sc);
  TrainingJob job = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 4, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full"})",
                                       "moe.json");
  const TrainingCounts c = count_training(job);
  // The dense gradients over DP 8 (TP 2 apart); the expert gradients apart, over the 2 GPUs holding each
  // expert share, 2 x 4 = 8 apart: GPU q of node n0 with GPU q of n1, across the nodes, as train plans them.
  CHECK(it.dp_bytes == c.dp_allreduce_bytes[0]);
  CHECK(it.expert_dp == 2);
  CHECK(it.expert_dp_bytes == c.expert_allreduce_bytes[0]);
  // The compute alone includes the all-to-alls: what train gives, less its own gradient reduction.
  const TrainingStep step = simulate_training_step(job);
  CHECK(step.ep_comm_s > 0);
  CHECK(it.on.front().compute_s == Approx(step.stage_end_s[0] + step.stage_optimizer_s[0]).epsilon(1e-12));
  // The all-to-alls also run on the shared network, beside the whole compute: per mixture layer (32) and
  // micro-batch (16 / DP 8 = 2) a dispatch and a combine forward, two combines backward, and, recomputing
  // the whole layer, its dispatch and combine again: 6 calls of the busiest GPU's buffer, in EP groups of 4
  // ranks 2 (expert TP) apart.
  CHECK(it.etp == 2);
  CHECK(it.ep_calls == 2 * 32 * 6);
  CHECK(it.ep_bytes == Approx(2 * 32 * 6 * c.ep_alltoall_bytes * job.expert_load()).epsilon(1e-12));
  const TaskSpec& task = sc.workflows.front().tasks.front();
  REQUIRE(task.collectives.size() == 5);  // and TP's and expert TP's all-reduces, for groups split across nodes only
  CHECK(task.collectives[3].group_size == 2);
  CHECK(task.collectives[3].split_groups_only);
  CHECK(task.collectives[4].group_size == 2);
  CHECK(task.collectives[4].split_groups_only);
  const CollectiveSpec& experts = task.collectives[1];
  CHECK(experts.op == CollectiveOp::all_reduce);
  CHECK(experts.group_size == 2);
  CHECK(experts.group_stride == 8);
  CHECK(experts.overlap == task.collectives[0].overlap);
  const CollectiveSpec& ep = task.collectives[2];
  CHECK(ep.op == CollectiveOp::all_to_all);
  CHECK(ep.group_size == 4);
  CHECK(ep.group_stride == 2);
  CHECK(ep.overlap == 1);
  CHECK(ep.calls == it.ep_calls);
  CHECK(ep.bytes == it.ep_bytes);
  const RunResult run = simulate(sc);
  REQUIRE(run.summary.training.size() == 1);
  CHECK(run.summary.training.front().completed == 2);
  // Alone, the iteration is train's: its compute, then the two reductions, each on its own groups.
  CHECK(run.summary.training.front().iteration_s.mean == Approx(run.summary.training.front().alone_s).epsilon(0.03));
  // The all-to-alls hide behind the compute that holds their time: the iteration is what it is with them off
  // the network.
  Scenario quiet = sc;
  for (TaskSpec& t : quiet.workflows.front().tasks) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_to_all; });
  INFO("alone " << run.summary.training.front().iteration_s.mean << " s; without the exchanges on the network " << simulate(quiet).summary.training.front().iteration_s.mean << " s");
  CHECK(run.summary.training.front().iteration_s.mean == Approx(simulate(quiet).summary.training.front().iteration_s.mean).epsilon(0.01));
  bool noted = false;
  for (const std::string& a : sc.workflows.front().assumptions) noted = noted || a.find("expert all-to-alls (384 an iteration") != std::string::npos;
  CHECK(noted);
  // DeepEP's exchanges inside a node (an EP block of 4 x 2 GPUs) stay with the compute, timed alone.
  const std::string deepep = R"({"name": "moe", "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 4, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full",
      "moe": {"dispatcher": "deepep"}})";
  const Scenario with_deepep = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + deepep + R"(, "iterations": 1}])"), "s.json", ".");
  CHECK(iteration_of(with_deepep).ep_calls == 0);
  CHECK(with_deepep.workflows.front().tasks.front().collectives.size() == 4);  // the two reductions, TP's and expert TP's
}

TEST_CASE("DeepEP's network leg runs on the shared network among the GPUs of one local rank", "[training][scenario][moe][deepep]") {
  // Mixtral 8x7B (8 experts, top 2) at TP 2 x DP 8, EP 8 under DeepEP on two HGX H100s: each EP group (8 ranks,
  // 2 apart) has 4 GPUs on each node, an expert each. A token goes over the network once to each node holding one
  // of its experts (its own among them), to the GPU of its own local rank there: with 4 experts a node, both
  // picks miss a node with probability (4/8)(3/7), so 2 (1 - 12/56) = 11/7 nodes, 11/14 of the flat all-to-all's
  // two copies. The pairs: GPU q of n0 with GPU q of n1 (2 ranks, 8 apart).
  const std::string deepep = R"({"name": "moe", "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full",
      "moe": {"dispatcher": "deepep"}})";
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + deepep + R"(, "iterations": 2}])"), "s.json", ".");
  const TrainingIteration& it = iteration_of(sc);
  const TrainingJob job = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full"})",
                                             "moe.json");
  const TrainingCounts c = count_training(job);
  // As NCCL's all-to-alls are counted: 32 mixture layers x 2 micro-batches x 6 exchanges (full recomputation).
  CHECK(it.ep_calls == 2 * 32 * 6);
  CHECK(it.ep_group_size == 2);
  CHECK(it.ep_group_stride == 8);
  CHECK(it.ep_bytes == Approx(2 * 32 * 6 * c.ep_alltoall_bytes * job.expert_load() * 11.0 / 14).epsilon(1e-12));
  const std::vector<CollectiveSpec>& collectives = sc.workflows.front().tasks.front().collectives;
  const auto exchanges = std::find_if(collectives.begin(), collectives.end(), [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_to_all; });
  REQUIRE(exchanges != collectives.end());
  CHECK(exchanges->group_size == 2);
  CHECK(exchanges->group_stride == 8);
  CHECK(exchanges->overlap == 1);
  CHECK(exchanges->bytes == it.ep_bytes);
  // Alone they hide behind the compute (which holds both legs' time); the NICs carry each GPU's half of its
  // buffer to its pair on the other node, over two links (its node's up, the other's down), every iteration.
  Scenario without = sc;
  for (TaskSpec& t : without.workflows.front().tasks) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_to_all; });
  const RunResult run = simulate(sc), quiet = simulate(without);
  REQUIRE(run.summary.training.front().completed == 2);
  CHECK(run.summary.training.front().iteration_s.mean == Approx(quiet.summary.training.front().iteration_s.mean).epsilon(1e-6));
  CHECK(run.summary.nic_bytes - quiet.summary.nic_bytes == Approx(2 * 16 * (it.ep_bytes / 2) * 2).epsilon(1e-6));
  bool noted = false;
  for (const std::string& a : sc.workflows.front().assumptions) noted = noted || a.find("DeepEP's network leg, among each EP group's GPUs a node apart in the gang's order (of one local rank where the gang fills whole nodes), 384 an iteration") != std::string::npos;
  CHECK(noted);
  // An fp8 dispatch: the dispatches (2 of the 6) at a byte and a 4-byte scale a 128 elements, the combines at 2.
  std::string fp8 = deepep;
  fp8.replace(fp8.find(R"("dispatcher": "deepep")"), 22, R"("dispatcher": "deepep", "dispatch_dtype": "fp8")");
  const Scenario with_fp8 = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + fp8 + R"(, "iterations": 1}])"), "s.json", ".");
  const TrainingIteration& eight = iteration_of(with_fp8);
  CHECK(eight.ep_bytes == Approx(it.ep_bytes * (2 * (1 + 4.0 / 128) / 2 + 4) / 6).epsilon(1e-12));
  // Nodes of two sizes: no rail layout is assumed, the exchanges stay with the compute.
  const std::string mixed = R"({"nodes": [{"type": "hgx-h100-8", "count": 2}, {"type": "h100-pcie-4", "count": 1}]})";
  const Scenario odd = parse_scenario(scenario(mixed, "", R"([{"training": )" + deepep + R"(, "iterations": 1}])"), "s.json", ".");
  CHECK(iteration_of(odd).ep_calls == 0);
  noted = false;
  for (const std::string& a : odd.workflows.front().assumptions) noted = noted || a.find("no rail layout is assumed: its EP blocks of 16 GPUs split nodes, or its nodes differ in size") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("TP groups a placement splits across nodes run their all-reduces on the shared network", "[training][scenario][tp]") {
  // Llama 3 8B at TP 8, 16 micro-batches of one sequence: each of the 32 layers all-reduces twice forward and twice
  // backward a micro-batch, as train times them inside the compute.
  const auto scenario_of = [](bool split) {
    // Split: a 4-GPU task on each node (its tenant pinned there) holds GPUs 0-3 of both, so the job's 8 GPUs are
    // 4-7 of each node, one TP group across the two.
    const std::string holds = split ? R"({"tenant": "x", "workflow": "hold", "arrival": {"process": "once"}}, {"tenant": "y", "workflow": "hold", "arrival": {"process": "once"}}, )" : "";
    return R"({"name": "tp", "cluster": )" + kOneSwitch + R"(, "tenants": [{"name": "x", "nodes": ["n0"]}, {"name": "y", "nodes": ["n1"]}, {"name": "train"}],
      "workflows": {"hold": {"tasks": [{"name": "hold", "gpus": 4, "work": {"flop": "20 EFLOP"}}]}},
      "workload": [)" + holds + R"({"tenant": "train", "training": )" + job("tp", R"({"tp": 8})") + R"(, "iterations": 2, "arrival": {"process": "once", "start": "1 ms"}}],
      "policy": {"name": "fifo"}})";
  };
  const Scenario aligned = parse_scenario(scenario_of(false), "s.json", "."), split = parse_scenario(scenario_of(true), "s.json", ".");
  const auto job_of = [](const Scenario& sc) {
    const auto wf = std::find_if(sc.workflows.begin(), sc.workflows.end(), [](const Workflow& w) { return w.id == "training:tp"; });
    REQUIRE(wf != sc.workflows.end());
    return static_cast<std::size_t>(wf - sc.workflows.begin());
  };
  const TrainingIteration& it = iteration_of(aligned, job_of(aligned));
  const TrainingCounts c = count_training(parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"tp": 8}, "batch": {"global": 16}})", "tp.json"));
  CHECK(it.tp_calls == 16 * 32 * 4);
  CHECK(it.tp_bytes == Approx(16 * 32 * 4 * c.tp_allreduce_bytes).epsilon(1e-12));
  CHECK(it.etp_calls == 0);
  const std::vector<CollectiveSpec>& collectives = aligned.workflows[job_of(aligned)].tasks.front().collectives;
  REQUIRE(collectives.size() == 1);
  CHECK(collectives[0].op == CollectiveOp::all_reduce);
  CHECK(collectives[0].group_size == 8);
  CHECK(collectives[0].group_stride == 1);
  CHECK(collectives[0].split_groups_only);
  CHECK(collectives[0].overlap == 0);
  // On 4-GPU nodes a TP 8 group always spans two: the compute times its all-reduces across them, and nothing is added.
  const Scenario wide = parse_scenario(scenario(R"({"nodes": [{"type": "h100-pcie-4", "count": 2}]})", "", R"([{"training": )" + job("tp", R"({"tp": 8})") + R"(, "iterations": 1}])"),
                                       "s.json", ".");
  CHECK(iteration_of(wide).tp_calls == 0);
  CHECK(wide.workflows.front().tasks.front().collectives.empty());
  // Beside an 8-GPU node a group may be split where a node holds it whole: the calls are counted (and a group on
  // the 4-GPU nodes, timed across them by the compute, is not played: Collectives::plays).
  const Scenario mixed = parse_scenario(scenario(R"({"nodes": [{"type": "hgx-h100-8", "count": 1}, {"type": "h100-pcie-4", "count": 2}]})", "",
                                                 R"([{"training": )" + job("tp", R"({"tp": 8})") + R"(, "iterations": 1}])"),
                                        "s.json", ".");
  CHECK(iteration_of(mixed).tp_calls == it.tp_calls);
  // Inside a node: nothing on the network, the iteration train's.
  const RunResult inside = simulate(aligned);
  const TrainingResult& alone = inside.summary.training.front();
  REQUIRE(alone.completed == 2);
  CHECK(inside.summary.nic_bytes == 0);
  CHECK(alone.iteration_s.mean == Approx(alone.alone_s).epsilon(1e-6));
  // Split across the nodes: the group's all-reduces load the NICs beside the compute.
  const RunResult across = simulate(split);
  const TrainingResult* job_result = nullptr;
  for (const TrainingResult& r : across.summary.training) job_result = &r;
  REQUIRE(job_result != nullptr);
  REQUIRE(job_result->completed == 2);
  std::vector<GpuId> gang;
  for (const TaskRecord& t : across.trace.tasks) {
    if (split.workflows[t.workflow].id != "training:tp") continue;
    REQUIRE(t.gpu_count == 8);
    gang.assign(across.trace.gpus.begin() + t.gpu_begin, across.trace.gpus.begin() + t.gpu_begin + t.gpu_count);
    std::set<std::uint32_t> nodes;
    for (GpuId g : gang) nodes.insert(index(across.cluster.node_of(g)));
    CHECK(nodes.size() == 2);
  }
  REQUIRE(!gang.empty());
  // They run after the compute: the iteration is train's and then the calls, each one all-reduce of the group on
  // those GPUs (the collective model's, alone: nothing else runs), back to back.
  const CollectivePlan one = plan_collective(across.cluster, across.topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, gang, it.tp_bytes / it.tp_calls);
  const double calls_s = it.tp_calls * simulated_times_s(across.topology, std::span(&one, 1)).front();
  INFO("NIC bytes " << across.summary.nic_bytes << "; iteration " << job_result->iteration_s.mean << " s against " << job_result->alone_s << " s alone, "
                    << calls_s << " s of calls");
  CHECK(across.summary.nic_bytes > 0);
  CHECK(job_result->iteration_s.mean - job_result->alone_s == Approx(calls_s).epsilon(0.02));
}

TEST_CASE("a mixture's all-to-alls across a spine slow another job's reduction there", "[training][scenario][moe]") {
  // As two jobs across one spine above: job a, Mixtral 8x7B at TP 2 x DP 8 with EP 8, on n0 and n2, so each
  // EP group (8 ranks 2 apart) has four GPUs on each leaf; job b, Llama 3 8B at TP 8 x DP 2, on n1 and n3.
  // a's all-to-alls cross the spine beside its compute: b's all-reduce, which crosses it too, takes longer
  // than with a's exchanges off the network (as before they ran there), and the spine carries their bytes.
  const std::string cluster = R"({"nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 4, "spines": 1}})";
  const std::string tenants = R"([{"name": "a", "nodes": ["n0", "n2"]}, {"name": "b", "nodes": ["n1", "n3"]}])";
  const std::string mixtral = R"({"name": "a", "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 16}, "recompute": "full"})";
  const std::string a = R"({"tenant": "a", "training": )" + mixtral + R"(, "iterations": 3})";
  const std::string b = R"({"tenant": "b", "training": )" + job("b", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 6})";
  const Scenario both = parse_scenario(scenario(cluster, tenants, "[" + a + ", " + b + "]"), "two.json", ".");
  // Each expert held once (EP 8 x expert TP 2 = 16): no expert reduction; TP's and expert TP's all-reduces (groups
  // inside nodes here).
  REQUIRE(both.workflows.front().tasks.front().collectives.size() == 4);
  Scenario quiet = both;  // a's exchanges off the shared network
  for (TaskSpec& t : quiet.workflows.front().tasks) std::erase_if(t.collectives, [](const CollectiveSpec& s) { return s.op == CollectiveOp::all_to_all; });
  const RunResult loud = simulate(both), still = simulate(quiet);
  const auto b_of = [](const RunResult& r) { return r.summary.training.at(1); };
  REQUIRE(b_of(loud).completed == 6);
  REQUIRE(b_of(still).completed == 6);
  INFO("b's iteration " << b_of(still).iteration_s.mean << " s with a's exchanges off the network, " << b_of(loud).iteration_s.mean << " s on it");
  CHECK(b_of(loud).iteration_s.mean > b_of(still).iteration_s.mean);
  CHECK(loud.summary.fabric_bytes > still.summary.fabric_bytes + 3 * 16 * iteration_of(both).ep_bytes / 4);
}

TEST_CASE("an fp8 training job is refused on a scenario's GPUs without fp8 tensor cores", "[training][scenario][fp8]") {
  const std::string a100 = R"({"nodes": [{"type": "hgx-a100-8", "count": 1}]})";
  CHECK_THAT(error_of(scenario(a100, "", R"([{"training": )" + job("f8", R"({"tp": 8})", R"(, "dtype": "fp8")") + R"(, "iterations": 1}])")),
             Catch::Contains("s.json: /workload/0/training/dtype: expected a dtype the GPU runs: a100-sxm-80gb has no fp8 tensor cores"));
  // On H100s it runs.
  const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("f8", R"({"tp": 8})", R"(, "dtype": "fp8")") + R"(, "iterations": 1}])"), "s.json", ".");
  CHECK(iteration_of(sc).on.front().compute_s > 0);
}

TEST_CASE("an FSDP job reducing in fp32 puts a third more bytes on the shared network", "[training][scenario][reduce]") {
  // Two gathers of the bf16 weights and a reduce-scatter of the gradients: 2 + 2 + 2 bytes a parameter in bf16,
  // 2 + 2 + 4 in fp32, counted as an all-reduce of the gradients (1.5 x 2 bytes, 1 x 4 bytes).
  const auto iteration = [](const std::string& reduce) {
    const Scenario sc = parse_scenario(scenario(kOneSwitch, "", R"([{"training": )" + job("f", R"({"dp": 16, "zero": 3, "reduce_dtype": ")" + reduce + R"("})") +
                                                                      R"(, "iterations": 1}])"),
                                       "s.json", ".");
    return iteration_of(sc);
  };
  const TrainingIteration bf16 = iteration("bf16"), fp32 = iteration("fp32");
  CHECK(fp32.dp_bytes == Approx(bf16.dp_bytes * 8 / 6));
  CHECK(fp32.dp_calls == bf16.dp_calls);
}

TEST_CASE("a training job's own checkpoint: each save holds its iteration up, and a failure rolls the job back to the last one", "[training][scenario][checkpoint]") {
  // Llama 3 8B at TP 8 x DP 2 on two HGX H100s, 20 iterations, a checkpoint every 5: each GPU writes 1/16 of
  // every parameter's bf16 weight and fp32 main copy and two Adam moments (2 + 4 + 4 + 4 bytes), a node's 8 at
  // 10 GB/s together.
  const std::string parallel = R"({"tp": 8, "dp": 2})";
  const auto with = [&](const std::string& checkpoint, const std::string& faults = "") {
    std::string text = scenario(kOneSwitch, "", R"([{"training": )" + job("ckpt", parallel) + R"(, "iterations": 20)" + checkpoint + "}]");
    if (!faults.empty()) text.insert(text.size() - 1, R"(, "faults": )" + faults);
    return parse_scenario(text, "s.json", ".");
  };
  const Scenario calm_sc = with(R"(, "checkpoint": {"every": 5, "write": "10 GB/s"})");
  const TrainingIteration& it = iteration_of(calm_sc);
  const TrainingJob alone = parse_training_job(R"({"cluster": )" + kOneSwitch + R"(, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": )" +
                                                   parallel + R"(, "batch": {"global": 16}})",
                                               "ckpt.json");
  const double parameters = count_training(alone).parameters;
  CHECK(parameters == Approx(8.03e9).epsilon(0.005));  // Meta's count for Llama 3 8B
  CHECK(it.checkpoint_every == 5);
  CHECK(it.checkpoint_bytes_per_gpu == Approx(parameters * 14 / 16).epsilon(1e-12));
  REQUIRE(it.on.size() == 1);
  const TrainingIteration::OnGpu& on = it.on.front();
  CHECK(on.checkpoint_s == Approx(it.checkpoint_bytes_per_gpu * 8 / 10e9).epsilon(1e-12));
  CHECK(on.checkpoint_load_s == on.checkpoint_s);
  // Four saves, each adding its time to the run (the gradient reduction runs after the compute: no overlap).
  const RunResult calm = simulate(calm_sc);
  const RunResult none = simulate(with(""));
  const TrainingResult& r = calm.summary.training.front();
  CHECK(r.completed == 20);
  CHECK(r.checkpoints == 4);
  CHECK(r.rollbacks == 0);
  CHECK(r.checkpoint_s == on.checkpoint_s);
  CHECK(calm.summary.makespan_s == Approx(none.summary.makespan_s + 4 * on.checkpoint_s).epsilon(1e-9));
  // GPU n0.g3 fails halfway through iteration 8, for a moment: the job goes back to the save after iteration 5
  // and, after the backoff, the scenario's restore and reading it back, computes iterations 6 and 7 again
  // before iteration 8 on the same GPUs.
  const TaskRecord& eighth = calm.trace.tasks.at(7);
  const double fail_at = eighth.start_s + 0.5 * (eighth.end_s - eighth.start_s);
  char at[64];
  std::snprintf(at, sizeof at, "%.9f s", fail_at);
  const RunResult failed = simulate(with(R"(, "checkpoint": {"every": 5, "write": "10 GB/s"})",
                                         R"({"events": [{"at": ")" + std::string(at) + R"(", "gpu": "n0.g3", "for": "1 ms"}], "retry": {"max_attempts": 2, "backoff": "2 s"},
                                             "checkpoint": {"interval": "1 h", "restore": "1 s"}})"));
  const TrainingResult& f = failed.summary.training.front();
  CHECK(f.completed == 20);
  CHECK(f.rollbacks == 1);
  CHECK(f.iterations_rolled_back == 2);
  CHECK(f.checkpoints == 4);
  const double lost_run_s = fail_at - eighth.start_s;
  CHECK(failed.summary.makespan_s == Approx(calm.summary.makespan_s + lost_run_s + 2 + 1 + on.checkpoint_load_s + 2 * on.compute_s).epsilon(1e-9));
  CHECK(failed.summary.lost_gpu_s == Approx((lost_run_s + 2 * on.compute_s) * 16).epsilon(1e-9));
  std::ostringstream text;
  write_summary_text(text, calm_sc, failed.summary);
  CHECK_THAT(summary_json(failed.summary), Catch::Contains("\"iterations_rolled_back\": 2"));
  CHECK_THAT(text.str(), Catch::Contains("checkpoint    ckpt: every 5 iterations") && Catch::Contains("1 rollback to the last save") &&
                             Catch::Contains("2 iterations computed again"));
  // Asynchronous: the save holds the iteration up for the copy into host memory; the write goes on behind.
  const Scenario async_sc = with(R"(, "checkpoint": {"every": 5, "write": "10 GB/s", "async": true})");
  const TrainingIteration& async = iteration_of(async_sc);
  const NodeGroup& g = calm_sc.cluster.groups.front();
  const double copy_s = std::max(async.checkpoint_bytes_per_gpu / g.host_link.bandwidth_Bps, async.checkpoint_bytes_per_gpu * 8 / g.node.host_memory_bandwidth_Bps);
  CHECK(async.on.front().checkpoint_s == Approx(copy_s + std::max(0.0, on.checkpoint_load_s - 5 * on.alone_s)).epsilon(1e-12));
  CHECK(async.on.front().checkpoint_s < on.checkpoint_s);
  // Bad input, with the field.
  const auto checkpoint_error = [&](const std::string& checkpoint) {
    return error_of(scenario(kOneSwitch, "", R"([{"training": )" + job("ckpt", parallel) + R"(, "iterations": 20, "checkpoint": )" + checkpoint + "}]"));
  };
  CHECK_THAT(checkpoint_error(R"({"every": 0, "write": "10 GB/s"})"), Catch::Contains("/workload/0/checkpoint/every"));
  CHECK_THAT(checkpoint_error(R"({"every": 5})"), Catch::Contains("/workload/0/checkpoint") && Catch::Contains("write"));
  CHECK_THAT(checkpoint_error(R"({"every": 50, "write": "10 GB/s"})"), Catch::Contains("/workload/0/checkpoint/every: expected at most the job's 20 iterations"));
  CHECK_THAT(checkpoint_error(R"({"every": 5, "write": "0 GB/s"})"), Catch::Contains("/workload/0/checkpoint/write: expected a positive rate"));
  CHECK_THAT(checkpoint_error(R"({"every": 5, "write": "10 GB/s", "later": 1})"), Catch::Contains("/workload/0/checkpoint") && Catch::Contains("later"));
}

TEST_CASE("a rollback is paid once: a suspension keeps what of it was paid, a second rollback loses no iteration twice", "[training][checkpoint]") {
  // One task: a rollback of 5 s before a 10-s compute; suspended 3 s into its run, 2 s of rollback are left.
  const FaultSpec faults{};
  run::Recovery recovery(faults, true);
  recovery.size_tasks({.tasks = 1, .most_tasks = 1});
  const TaskId task = make_id<TaskId>(0);
  const run::Recovery::RolledBack first = recovery.roll_back(task, 5);
  CHECK(first.first);
  CHECK(first.saved_lost_s == 0);
  CHECK(recovery.begin_compute(task, 10, 0, 8) == 15);
  CHECK(recovery.suspend(task, 3, 0) == 0);  // nothing of the iteration computed yet
  CHECK(recovery.begin_compute(task, 10, 0, 8) == 12);
  // Suspended 6 s into that run: the rollback paid, 4 s of the iteration saved; its next run pays the
  // suspension's restore of 1 s and computes the other 6.
  CHECK(recovery.suspend(task, 6, 1) == 4);
  CHECK(recovery.begin_compute(task, 10, 0, 8) == 7);
  // Then a failure rolls it back again: what the suspension saved of the iteration is lost, and the
  // rollback is not the task's first.
  const run::Recovery::RolledBack second = recovery.roll_back(task, 5);
  CHECK_FALSE(second.first);
  CHECK(second.saved_lost_s == 4);
  CHECK(recovery.begin_compute(task, 10, 0, 8) == 15);
}

namespace {

// Two HGX H100s; a Llama 3 8B job at TP 8 x DP 2 (`elastic` beside it, where given), and where `eval_flop` is
// given, an 8-GPU task of another tenant arriving 5 s in.
std::string elastic_scenario(const std::string& parallel, const std::string& elastic, const std::string& eval_flop = "") {
  const std::string eval = eval_flop.empty() ? "" : R"(, {"tenant": "eval", "workflow": "eval", "arrival": {"process": "once", "start": "5 s"}})";
  return R"({"name": "elastic", "cluster": )" + kOneSwitch + R"(, "tenants": [{"name": "train"}, {"name": "eval"}],
    "workflows": {"eval": {"tasks": [{"name": "eval", "gpus": 8, "work": {"flop": ")" + (eval_flop.empty() ? "1 TFLOP" : eval_flop) + R"("}}]}},
    "workload": [{"tenant": "train", "training": )" + job("llama", parallel) + R"(, "iterations": 40)" + elastic + "}" + eval + R"(],
    "policy": {"name": "fifo"}})";
}

const TaskSpec& training_task(const Scenario& sc) {
  for (const Workflow& wf : sc.workflows) {
    if (wf.id == "training:llama") return wf.tasks.front();
  }
  throw std::logic_error("no training job");
}

}  // namespace

TEST_CASE("an elastic training job alone runs every iteration at its largest DP, as the same job not elastic", "[training][scenario][elastic]") {
  const std::string dp2 = R"({"tp": 8, "dp": 2})";
  const RunResult plain = simulate(parse_scenario(elastic_scenario(dp2, ""), "s.json", "."));
  const Scenario sc = parse_scenario(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 1, "restart": "10 s"})"), "s.json", ".");
  const TaskSpec& task = training_task(sc);
  REQUIRE(task.elastic);
  CHECK(task.elastic->sizes == std::vector<std::uint32_t>{8, 16});
  REQUIRE(task.on_sizes);
  CHECK(task.as_run_on(8).training->dp == 1);
  // DP 1: no gradient reduction, only TP's all-reduces (for TP groups split across nodes).
  REQUIRE(task.as_run_on(8).collectives.size() == 1);
  CHECK(task.as_run_on(8).collectives[0].split_groups_only);
  CHECK(task.as_run_on(16).training->dp == 2);
  CHECK(task.as_run_on(16).collectives.size() == 2);
  CHECK(task.runs_on(8));
  CHECK(task.runs_on(16));
  CHECK_FALSE(task.runs_on(12));
  const RunResult run = simulate(sc);
  const TrainingResult& r = run.summary.training.at(0);
  CHECK(r.completed == 40);
  CHECK(r.completed_at_dp == std::vector<std::uint64_t>{0, 40});
  CHECK(r.restarts == 0);
  CHECK(r.iteration_s.mean == plain.summary.training.at(0).iteration_s.mean);
  CHECK(r.mfu == Approx(plain.summary.training.at(0).mfu).epsilon(1e-12));
  // min_dp at the job's dp turns elasticity off (handy with --set): the job as without the field.
  const Scenario off = parse_scenario(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 2, "restart": "10 s"})", "200 PFLOP"), "s.json", ".");
  CHECK_FALSE(training_task(off).elastic);
  const RunResult fixed = simulate(parse_scenario(elastic_scenario(dp2, "", "200 PFLOP"), "s.json", "."));
  CHECK(simulate(off).summary.makespan_s == fixed.summary.makespan_s);
}

TEST_CASE("an elastic training job gives GPUs to a task that waits and takes them back, paying its restart at each change", "[training][scenario][elastic]") {
  // FIFO: the eval task, arriving while an iteration runs, is placed at the iteration's end on one node, and
  // the next iteration on the other at DP 1; once the eval ends, the next iteration is placed at DP 2 again.
  // Each change moves the job onto other GPUs, so it pays its 10 s restart twice. Its iterations then take,
  // in all, n2 of DP 2's iteration alone, n1 of DP 1's and two restarts: nothing else shares its links.
  const double restart = 10;
  const std::string elastic = R"(, "elastic": {"min_dp": 1, "restart": "10 s"})";
  const RunResult dp2 = simulate(parse_scenario(elastic_scenario(R"({"tp": 8, "dp": 2})", ""), "s.json", "."));
  const RunResult dp1 = simulate(parse_scenario(elastic_scenario(R"({"tp": 8, "dp": 1})", ""), "s.json", "."));
  const double t2 = dp2.summary.training.at(0).iteration_s.mean, t1 = dp1.summary.training.at(0).iteration_s.mean;
  const Scenario sc = parse_scenario(elastic_scenario(R"({"tp": 8, "dp": 2})", elastic, "200 PFLOP"), "s.json", ".");
  const RunResult run = simulate(sc);
  const TrainingResult& r = run.summary.training.at(0);
  REQUIRE(r.completed == 40);
  REQUIRE(r.completed_at_dp.size() == 2);
  const auto n1 = static_cast<double>(r.completed_at_dp[0]), n2 = static_cast<double>(r.completed_at_dp[1]);
  CHECK(n1 > 0);
  CHECK(n2 > 0);
  CHECK(n1 + n2 == 40);
  CHECK(r.restarts == 2);
  const double total = r.iteration_s.mean * static_cast<double>(r.iteration_s.count);
  CHECK(total == Approx(n2 * t2 + n1 * t1 + 2 * restart).epsilon(1e-6));
  // The restarts' GPU-time: 8 GPUs at the shrink, 16 at the growth.
  CHECK(run.summary.restart_gpu_s == Approx(restart * (8 + 16)).epsilon(1e-9));
  // MFU over the GPUs each iteration held.
  const double gpu_s = 16 * n2 * t2 + 8 * n1 * t1 + restart * (8 + 16);
  CHECK(r.mfu == Approx(r.iteration->model_flop * 40 / (gpu_s * r.iteration->on.front().peak_flops)).epsilon(1e-6));
  // The eval waited for the iteration that was running, no longer.
  CHECK(run.summary.tenants.at(1).mean_wait_s <= t2);
  // The same run twice: the same summary.
  const RunResult again = simulate(sc);
  CHECK(again.summary.training.at(0).iteration_s.mean == r.iteration_s.mean);
  CHECK(again.summary.training.at(0).completed_at_dp == r.completed_at_dp);
  CHECK(again.summary.makespan_s == run.summary.makespan_s);
}

TEST_CASE("an elastic training job runs only at DP degrees its batch divides into, and every GPU holds the most any needs", "[training][scenario][elastic]") {
  // Global batch 16 over DP 8 at TP 2: from min_dp 3, the degrees 4 and 8 (3, 5, 6 and 7 do not divide 16).
  const Scenario sc = parse_scenario(elastic_scenario(R"({"tp": 2, "dp": 8, "distributed_optimizer": true})", R"(, "elastic": {"min_dp": 3, "restart": "1 min"})"), "s.json", ".");
  const TaskSpec& task = training_task(sc);
  REQUIRE(task.elastic);
  CHECK(task.elastic->sizes == std::vector<std::uint32_t>{8, 16});
  CHECK(task.elastic->min_gpus == 8);
  CHECK(task.training->elastic_dp == std::vector<int>{4, 8});
  // The distributed optimizer's share is larger on fewer replicas: the task holds DP 4's.
  CHECK(task.as_run_on(8).training->memory_per_gpu_bytes > task.as_run_on(16).training->memory_per_gpu_bytes);
  CHECK(task.working_set_bytes == task.as_run_on(8).training->memory_per_gpu_bytes);
  const std::vector<std::string>& notes = sc.workflows.back().assumptions;
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& n) { return n.find("elastic at DP 4, 8 (8 to 16 GPUs") != std::string::npos; }));
}

TEST_CASE("elastic training jobs that cannot run are refused with the file and field", "[training][scenario][elastic]") {
  const std::string dp2 = R"({"tp": 8, "dp": 2})";
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 3, "restart": "10 s"})")),
             Catch::Contains("/workload/0/elastic/min_dp: expected at most the job's dp (2, the most replicas it runs), found 3"));
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 0, "restart": "10 s"})")), Catch::Contains("/workload/0/elastic/min_dp"));
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 1})")), Catch::Contains("/workload/0/elastic/restart: missing required field"));
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 1, "restart": "10 s", "grow": true})")), Catch::Contains("/workload/0/elastic/grow"));
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": 1)")), Catch::Contains("/workload/0/elastic"));
  CHECK_THAT(error_of(elastic_scenario(dp2, R"(, "elastic": {"min_dp": 1, "restart": "10 s"}, "checkpoint": {"every": 10, "write": "10 GB/s"})")),
             Catch::Contains("/workload/0/elastic: expected an elastic job or a job with its own checkpoint, not both"));
  // From DP 5 to 7 none divides the global batch of 16: the job could only run at its full degree.
  CHECK_THAT(error_of(elastic_scenario(R"({"tp": 2, "dp": 8})", R"(, "elastic": {"min_dp": 5, "restart": "10 s"})")),
             Catch::Contains("/workload/0/elastic/min_dp: expected a DP degree from 5 to 7 that the global batch of 16 divides into (as train accepts it), found none"));
  // At DP 1 the whole optimizer state on each GPU (ZeRO-1 shards it over the replicas): it does not fit.
  CHECK_THAT(error_of(elastic_scenario(R"({"tp": 1, "dp": 16, "distributed_optimizer": true})", R"(, "elastic": {"min_dp": 1, "restart": "10 s"})")),
             Catch::Contains("elastic, at DP 1: "));
}

TEST_CASE("elastic training jobs beside other gangs under random failures break no invariant", "[training][scenario][elastic][faults][property]") {
  // 8-GPU tasks arriving at random take GPUs between iterations; GPUs and nodes fail and are repaired. The
  // invariants (every gang one of the job's sizes, no GPU held twice) are checked inside each run.
  const std::string sc_json = R"({"name": "elastic-faults", "cluster": )" + kOneSwitch + R"(, "tenants": [{"name": "train"}, {"name": "eval"}],
    "workflows": {"eval": {"tasks": [{"name": "eval", "gpus": 8, "work": {"flop": "40 PFLOP"}}]}},
    "workload": [{"tenant": "train", "training": )" + job("llama", R"({"tp": 4, "dp": 4})") + R"(, "iterations": 60, "elastic": {"min_dp": 1, "restart": "2 s"}},
                 {"tenant": "eval", "workflow": "eval", "arrival": {"process": "poisson", "rate": "0.1 /s", "count": 6}}],
    "faults": {"gpu": {"mtbf": "10 min", "mttr": "5 s"}, "node": {"mtbf": "1 h", "mttr": "10 s"}, "retry": {"max_attempts": 3, "backoff": "1 s"}},
    "policy": {"name": "fifo"}})";
  const Scenario sc = parse_scenario(sc_json, "s.json", ".");
  std::uint64_t restarts = 0, stopped = 0, at_smaller = 0;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const RunResult run = simulate(sc, {.seed = seed});
    const Summary& s = run.summary;
    CHECK(s.tasks.completed + s.tasks.failed + s.tasks.running + s.tasks.queued == s.tasks.submitted);
    const TrainingResult& r = s.training.at(0);
    REQUIRE(r.completed_at_dp.size() == 3);  // DP 1, 2 and 4 (16 divides into each; 3 does not)
    CHECK(r.completed_at_dp[0] + r.completed_at_dp[1] + r.completed_at_dp[2] == r.completed);
    restarts += r.restarts;
    stopped += s.tasks_stopped;
    at_smaller += r.completed_at_dp[0] + r.completed_at_dp[1];
  }
  CHECK(restarts > 0);
  CHECK(stopped > 0);
  CHECK(at_smaller > 0);
}

TEST_CASE("an elastic training iteration a higher-priority task overtakes runs at once on what that task leaves", "[training][scenario][elastic][policy]") {
  // A 16-GPU task holds both nodes; the job's first iteration waits for it, asking for DP 2; an 8-GPU task of a
  // higher priority arrives behind it. When the 16 GPUs free up, the policy places the 8-GPU task first; the
  // iteration, left with 8 GPUs, runs at DP 1 at once rather than wait for the other task to end.
  const std::string sc_json = R"({"name": "elastic-priority", "cluster": )" + kOneSwitch + R"(,
    "tenants": [{"name": "train"}, {"name": "eval", "priority": 1}, {"name": "hold"}],
    "workflows": {"eval": {"tasks": [{"name": "eval", "gpus": 8, "work": {"flop": "200 PFLOP"}}]},
                  "hold": {"tasks": [{"name": "hold", "gpus": 16, "work": {"flop": "100 PFLOP"}}]}},
    "workload": [{"tenant": "hold", "workflow": "hold", "arrival": {"process": "once"}},
                 {"tenant": "train", "training": )" + job("llama", R"({"tp": 8, "dp": 2})") + R"(, "iterations": 4, "elastic": {"min_dp": 1, "restart": "1 s"},
                  "arrival": {"process": "once", "start": "100 ms"}},
                 {"tenant": "eval", "workflow": "eval", "arrival": {"process": "once", "start": "1 s"}}],
    "policy": {"name": "priority"}})";
  const Scenario sc = parse_scenario(sc_json, "s.json", ".");
  const RunResult run = simulate(sc);
  const auto record = [&](const std::string& id) -> const TaskRecord& {
    for (const TaskRecord& t : run.trace.tasks) {
      if (sc.workflows[t.workflow].id == id && t.task == 0) return t;
    }
    throw std::logic_error("no record");
  };
  const TaskRecord &hold = record("hold"), &eval = record("eval"), &first = record("training:llama");
  CHECK(eval.start_s == hold.end_s);
  CHECK(first.start_s == hold.end_s);
  CHECK(first.gpu_count == 8);
  CHECK(first.start_s < eval.end_s);
}
