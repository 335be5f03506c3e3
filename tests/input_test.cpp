// Every loader rejects bad input before a simulation starts, naming the file, the field (JSON
// pointer) and what was expected.
#include <catch2/catch.hpp>

#include "fleetsim/error.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/units.hpp"
#include "helpers.hpp"

using Catch::Contains;
using fleetsim::Catalog;
using fleetsim::InputError;
using fleetsim::test::scenario_error;

namespace {

std::string catalog_error(const std::string& json) {
  Catalog c;
  try {
    c.add_json(json, "cat.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string workflow_error(const std::string& json) {
  try {
    fleetsim::parse_workflow(json, "wf.json", Catalog::builtin());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kGpu = R"("g": {"name": "G", "vram": "10 GB", "memory_bandwidth": "1 TB/s",
                            "peak_flops": {"bf16": "100 TFLOP/s"}, "tdp": "300 W",
                            "price_usd_per_hour": 1, "source": "test"})";

// A valid scenario over the test catalog with one replaceable part.
std::string scenario_with(const std::string& cluster, const std::string& task = R"({"name": "t", "work": {"flop": "1 TFLOP"}})",
                          const std::string& extra = "") {
  return R"({"name": "s", "catalog": ["unit-catalog.json"], "cluster": )" + cluster +
         R"(, "workflows": {"w": {"tasks": [)" + task +
         R"(]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}])" + extra + "}";
}
const std::string kOneNode = R"({"nodes": [{"type": "unit-node-2", "count": 1}]})";

}  // namespace

TEST_CASE("the built-in catalog has the required GPU types, each with a source", "[catalog]") {
  const Catalog& c = Catalog::builtin();
  for (const char* id : {"h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "rtx-4090", "b200"}) {
    INFO(id);
    const fleetsim::GpuType* g = c.gpu(id);
    REQUIRE(g != nullptr);
    CHECK(g->vram_bytes > 0);
    CHECK(g->peak_for(fleetsim::Dtype::bf16) > 0);
    CHECK(g->memory_bandwidth_Bps > 0);
    CHECK(g->price_usd_per_hour > 0);
    CHECK_FALSE(g->source.empty());
  }
  // Datasheet figures (dense): H100 SXM 989.4 TFLOP/s bf16, 3.35 TB/s, 80 GB.
  CHECK(c.gpu("h100-sxm")->peak_for(fleetsim::Dtype::bf16) == Approx(989.4e12));
  CHECK(c.gpu("h100-sxm")->memory_bandwidth_Bps == Approx(3.35e12));
  for (const auto& [id, node] : c.nodes()) {
    INFO(id);
    CHECK(c.gpu(node.gpu) != nullptr);
    CHECK_FALSE(node.source.empty());
  }
  for (const auto& [id, op] : c.operators()) CHECK_FALSE(op.source.empty());
}

TEST_CASE("the catalog has the GPUs of public cluster traces and older clusters, with their datasheet figures", "[catalog]") {
  const Catalog& c = Catalog::builtin();
  for (const char* id : {"v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb", "p100-sxm2", "p100-pcie-16gb", "p100-pcie-12gb",
                         "p40", "t4", "a10", "a10g", "a30", "l4", "a40", "a800-sxm-80gb", "h800-sxm", "h20", "mi250x-gcd"}) {
    INFO(id);
    const fleetsim::GpuType* g = c.gpu(id);
    REQUIRE(g != nullptr);
    CHECK(g->price_usd_per_hour > 0);
    CHECK(g->peak_for(fleetsim::Dtype::bf16) > 0);
    CHECK_FALSE(g->source.empty());
  }
  // Volta has no bf16: it runs at the fp16 tensor peak (V100 SXM2 datasheet: 125 TFLOP/s). The P40 has no
  // usable fp16: it runs at its fp32 peak (12 TFLOP/s).
  CHECK(c.gpu("v100-sxm2-32gb")->peak_for(fleetsim::Dtype::bf16) == Approx(125e12));
  CHECK(c.gpu("p40")->peak_for(fleetsim::Dtype::bf16) == Approx(12e12));
  CHECK(c.gpu("t4")->peak_for(fleetsim::Dtype::fp8) == Approx(65e12));  // no fp8: int8 is not a float format
  CHECK(fleetsim::gpu_arch_name(c.gpu("t4")->arch) == "turing");
  // Every NVIDIA GPU has a training throughput against the V100 16 GB, the table's 1, each with its source; a figure
  // that no benchmark measured on that GPU is marked estimated (the P40's: no published comparison).
  using fleetsim::TrainingPrecision;
  for (const auto& [id, g] : c.gpus()) {
    INFO(id);
    const bool nvidia = g.arch != fleetsim::GpuArch::unknown;
    CHECK((g.training_throughput.of(TrainingPrecision::fp32) > 0) == nvidia);
    CHECK((g.training_throughput.of(TrainingPrecision::mixed) > 0) == nvidia);
    CHECK(g.training_throughput.source.empty() == !nvidia);
  }
  CHECK(c.gpu("v100-sxm2-16gb")->training_throughput.of(TrainingPrecision::fp32) == 1);
  CHECK(c.gpu("p40")->training_throughput.estimated_in(TrainingPrecision::fp32));
  CHECK_FALSE(c.gpu("p100-pcie-16gb")->training_throughput.estimated_in(TrainingPrecision::fp32));
  CHECK(c.gpu("p100-pcie-16gb")->training_throughput.estimated_in(TrainingPrecision::mixed));
  CHECK(fleetsim::gpu_arch_name(c.gpu("p100-pcie-12gb")->arch) == "pascal");
  CHECK(c.gpu("h800-sxm")->peak_for(fleetsim::Dtype::fp64) == Approx(1e12));
  // The A800 and H800 differ from the A100 and H100 by their NVLink: 400 GB/s both ways, 200 per direction.
  CHECK(c.link(c.node("hgx-a800-8")->gpu_link)->bandwidth_Bps == Approx(200e9));
  CHECK(c.link(c.node("hgx-h800-8")->gpu_link)->bandwidth_Bps == Approx(200e9));
  for (const auto& [id, node] : c.nodes()) {
    INFO(id);
    CHECK(c.link(node.gpu_link) != nullptr);
    CHECK(c.link(node.host_link) != nullptr);
    CHECK(c.link(node.nic) != nullptr);
  }
}

TEST_CASE("a missing dtype runs at the next supported one of its chain", "[catalog]") {
  const fleetsim::GpuType& a100 = *Catalog::builtin().gpu("a100-sxm-80gb");
  CHECK(a100.peak_flop_per_s[static_cast<std::size_t>(fleetsim::Dtype::fp8)] == 0);
  CHECK(a100.peak_for(fleetsim::Dtype::fp8) == a100.peak_for(fleetsim::Dtype::fp16));
  fleetsim::GpuType bf16_only;
  bf16_only.peak_flop_per_s[static_cast<std::size_t>(fleetsim::Dtype::bf16)] = 7;
  CHECK(bf16_only.peak_for(fleetsim::Dtype::fp8) == 7);
  CHECK(bf16_only.peak_for(fleetsim::Dtype::fp16) == 7);
  CHECK(bf16_only.peak_for(fleetsim::Dtype::fp32) == 0);
}

TEST_CASE("catalog files are checked strictly", "[catalog][errors]") {
  CHECK_THAT(catalog_error("{\"gpus\": {"), Contains("cat.json") && Contains("malformed JSON at line 1"));
  CHECK_THAT(catalog_error(std::string("{\"gpus\": {") + kGpu + "}, \"gpu\": {}}"),
             Contains("cat.json: /gpu: unknown field"));
  std::string typo = std::string("{\"gpus\": {") + kGpu + "}}";
  typo.replace(typo.find("\"tdp\""), 5, "\"tpd\"");
  CHECK_THAT(catalog_error(typo), Contains("/gpus/g/tpd: unknown field") && Contains("did you mean \"tdp\"?") && !Contains("/gpus/g/tdp: missing required field"));
  // Names chosen from a list say which was meant; prices and launch times have ceilings.
  const auto edited = [](const std::string& from, const std::string& to) {
    std::string text = std::string("{\"gpus\": {") + kGpu + "}}";
    return catalog_error(text.replace(text.find(from), from.size(), to));
  };
  CHECK_THAT(edited("\"tdp\"", "\"arch\": \"hoper\", \"tdp\""), Contains("/gpus/g/arch: expected one of") && Contains("did you mean \"hopper\"?"));
  CHECK_THAT(edited("\"price_usd_per_hour\": 1", "\"price_usd_per_hour\": 1e308"),
             Contains("/gpus/g/price_usd_per_hour: expected a number from 0.0 to 1000000.0"));
  CHECK_THAT(edited("\"tdp\"", "\"launch_overhead\": \"1e300 s\", \"tdp\""), Contains("/gpus/g/launch_overhead: expected at most 1 s"));
  // A training throughput names both precisions, says which are estimated, and its source.
  CHECK_THAT(edited("\"tdp\"", "\"training_throughput\": {\"fp32\": 2, \"estimated\": \"some\", \"source\": \"\"}, \"tdp\""),
             Contains("/gpus/g/training_throughput/mixed: missing required field") &&
                 Contains("/gpus/g/training_throughput/estimated: expected one of \"none\", \"fp32\", \"mixed\", \"both\"") &&
                 Contains("/gpus/g/training_throughput/source: expected the public source"));
  CHECK_THAT(edited("\"tdp\"", "\"training_throughput\": {\"fp32\": 0, \"mixed\": 1, \"source\": \"x\", \"fp16\": 1}, \"tdp\""),
             Contains("/gpus/g/training_throughput/fp32: expected a number from 1e-06") && Contains("/gpus/g/training_throughput/fp16: unknown field"));
  CHECK_THAT(edited("\"tdp\"", "\"training_throughput\": 3, \"tdp\""), Contains("/gpus/g/training_throughput: expected an object"));
  std::string negative = std::string("{\"gpus\": {") + kGpu + "}}";
  negative.replace(negative.find("10 GB"), 5, "-10 GB");
  CHECK_THAT(catalog_error(negative), Contains("/gpus/g/vram: expected a size") && Contains("negative"));
  std::string number = std::string("{\"gpus\": {") + kGpu + "}}";
  number.replace(number.find("\"10 GB\""), 7, "10");
  CHECK_THAT(catalog_error(number), Contains("/gpus/g/vram") && Contains("found the number 10 (write the unit)"));
  std::string nosource = std::string("{\"gpus\": {") + kGpu + "}}";
  nosource.replace(nosource.find("\"test\""), 6, "\"\"");
  CHECK_THAT(catalog_error(nosource), Contains("/gpus/g/source: expected the public source"));
  CHECK_THAT(catalog_error(R"({"nodes": {"n": {"name": "N", "gpu": "nope", "gpus": 8, "gpu_link": "l", "host_link": "l",
                                "nic": "l", "nics": 1, "source": "x"}}})"),
             Contains("/nodes/n/gpu: unknown GPU type \"nope\"") && Contains("/nodes/n/nic: unknown link type"));
  CHECK_THAT(catalog_error(R"({"links": {"l": {"name": "L", "kind": "carrier-pigeon", "bandwidth": "1 GB/s", "latency": "1 s", "source": "x"}}})"),
             Contains("/links/l/kind: expected one of nvlink"));
}

TEST_CASE("a catalog file may not redefine an id, and a failed file changes nothing", "[catalog][errors]") {
  Catalog c;
  c.add_json(std::string("{\"gpus\": {") + kGpu + "}}", "a.json");
  CHECK_THROWS_WITH(c.add_json(std::string("{\"gpus\": {") + kGpu + "}}", "b.json"),
                    Contains("b.json: /gpus/g: duplicate id"));
  CHECK(c.gpus().size() == 1);
}

TEST_CASE("workflow files are checked strictly", "[workflow][errors]") {
  CHECK_THAT(workflow_error(R"({"tasks": []})"), Contains("wf.json: /tasks: expected a non-empty array"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}, {"name": "a", "work": {"flop": "1 TFLOP"}}]})"),
             Contains("/tasks/1/name: duplicate task name \"a\""));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"operator": "nope"}}]})"),
             Contains("/tasks/0/work/operator: unknown operator profile \"nope\""));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "model": "nope", "work": {"flop": "1 TFLOP"}}]})"),
             Contains("/tasks/0/model: unknown model \"nope\""));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": 0, "work": {"flop": "1 TFLOP"}}]})"),
             Contains("/tasks/0/gpus: expected an integer from 1"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": "2", "work": {"flop": "1 TFLOP"}}]})"),
             Contains("/tasks/0/gpus: expected an integer") && Contains("found \"2\""));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"flop": "1 TFLOP", "dtype": "fp4"}}]})"),
             Contains("/tasks/0/work/dtype: expected one of"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"operator": "sdxl-vae-decode-1024", "flop": "1 TFLOP"}}]})"),
             Contains("/tasks/0/work/operator: give either"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}], "edges": [{"from": "a", "to": "b"}]})"),
             Contains("/edges/0/to: unknown task \"b\""));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}], "edges": [{"from": "a", "to": "a"}]})"),
             Contains("/edges/0/to: an edge from a task to itself is a cycle"));
}

TEST_CASE("a cycle in a workflow is named", "[workflow][errors]") {
  const std::string msg = workflow_error(R"({"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}},
      {"name": "b", "work": {"flop": "1 TFLOP"}}, {"name": "c", "work": {"flop": "1 TFLOP"}}],
      "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "a"}]})");
  CHECK_THAT(msg, Contains("wf.json: /edges: the edges form a cycle") && Contains("a workflow must be a DAG"));
}

TEST_CASE("a workflow's topological order respects every edge", "[workflow]") {
  const fleetsim::Workflow wf = fleetsim::parse_workflow(R"({"tasks": [
      {"name": "d", "work": {"flop": "1 TFLOP"}}, {"name": "c", "work": {"flop": "1 TFLOP"}},
      {"name": "b", "work": {"flop": "1 TFLOP"}}, {"name": "a", "work": {"flop": "1 TFLOP"}}],
      "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "a", "to": "c"}, {"from": "c", "to": "d"}]})",
                                                         "wf.json", Catalog::builtin());
  std::vector<std::size_t> position(wf.tasks.size());
  for (std::size_t i = 0; i < wf.topological_order().size(); ++i) position[wf.topological_order()[i]] = i;
  for (const fleetsim::EdgeSpec& e : wf.edges) CHECK(position[e.from] < position[e.to]);
  CHECK(wf.inputs(1).size() == 2);   // c <- a, b
  CHECK(wf.outputs(3).size() == 2);  // a -> b, c
}

TEST_CASE("scenarios are checked strictly", "[scenario][errors]") {
  CHECK_THAT(scenario_error(scenario_with(R"({"nodes": [{"type": "dgx-9000", "count": 1}]})")),
             Contains("bad.json: /cluster/nodes/0/type: unknown node type \"dgx-9000\""));
  CHECK_THAT(scenario_error(scenario_with(R"({"nodes": [{"type": "unit-node-2", "count": -1}]})")),
             Contains("/cluster/nodes/0/count: expected an integer from 1"));
  CHECK_THAT(scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})",
                                          R"(, "policy": {"name": "best"})")),
             Contains("/policy/name: unknown policy \"best\" (expected one of \"fifo\""));
  CHECK_THAT(scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})",
                                          R"(, "policy": {"name": "fifo", "params": {"x": 1}})")),
             Contains("/policy/params/x: unknown field"));
  CHECK_THAT(scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})",
                                          R"(, "horizon": "soon")")),
             Contains("/horizon: expected a duration"));
  CHECK_THAT(scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})",
                                          R"(, "slos": [{"tenant": "ghost", "metric": "latency_p95", "target": "1 s"}])")),
             Contains("/slos/0/tenant: unknown tenant \"ghost\""));
  CHECK_THAT(scenario_error(R"({"name": "s", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": "no-such-workflow.json"}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})"),
             Contains("/workflows/w: cannot use \"") && Contains("no-such-workflow.json\": cannot read it: No such file or directory"));
  CHECK_THAT(scenario_error(R"({"name": "s", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "v", "arrival": {"process": "poisson", "rate": "1 /s"}}]})"),
             Contains("/workload/0/workflow: unknown workflow \"v\" (expected one of \"w\")") &&
                 Contains("/workload/0/arrival/count: missing"));
  CHECK_THAT(scenario_error("[1, 2]"), Contains("bad.json: expected an object, found an array"));
}

TEST_CASE("all problems of a scenario are reported together", "[scenario][errors]") {
  const std::string msg = scenario_error(R"({"name": 3, "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "colour": "red"}]},
      "catalog": ["unit-catalog.json"],
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "sometimes"}}]})");
  CHECK_THAT(msg, Contains("/name: expected a string") && Contains("/cluster/nodes/0/colour: unknown field") &&
                      Contains("/workload/0/arrival/process: expected one of"));
}

TEST_CASE("a task that fits no GPU is rejected before the simulation", "[scenario][errors]") {
  const std::string msg = scenario_error(scenario_with(
      kOneNode, R"({"name": "huge", "model": {"id": "m", "weights": "90 GB"}, "working_set": "20 GB", "work": {"flop": "1 TFLOP"}})"));
  CHECK_THAT(msg, Contains("bad.json: /workflows/w/tasks/0: task \"huge\" needs 110 GB of VRAM per GPU") &&
                      Contains("largest GPU") && Contains("(100 GB)"));
  // The same model sharded over a gang of two fits.
  CHECK(scenario_error(scenario_with(
            kOneNode, R"({"name": "huge", "gpus": 2, "model": {"id": "m", "weights": "90 GB"}, "working_set": "20 GB", "work": {"flop": "1 TFLOP"}})")) == "");
  CHECK_THAT(scenario_error(scenario_with(kOneNode, R"({"name": "wide", "gpus": 3, "work": {"flop": "1 TFLOP"}})")),
             Contains("task \"wide\" needs a gang of 3 GPUs") && Contains("has 2 such GPUs"));
  // Offloading up to half of a 40 GB working set to host memory makes 90 + 20 fit; a tenth does not.
  const std::string big = R"({"name": "huge", "model": {"id": "m", "weights": "90 GB"}, "working_set": "20 GB", "work": {"flop": "1 TFLOP"}})";
  CHECK(scenario_error(scenario_with(kOneNode, big, R"(, "memory": {"max_offload": 0.5})")) == "");
  CHECK_THAT(scenario_error(scenario_with(kOneNode, big, R"(, "memory": {"max_offload": 0.1})")),
             Contains("less the 2 GB memory.max_offload lets it keep in host memory"));
  CHECK_THAT(scenario_error(scenario_with(kOneNode, big, R"(, "memory": {"max_offload": 1.5})")),
             Contains("/memory/max_offload"));
}

TEST_CASE("inline overrides change one field of a catalog entry", "[scenario]") {
  const fleetsim::Scenario sc = fleetsim::test::unit_scenario(R"(
      "cluster": {"nodes": [{"type": "unit-node-2", "count": 3, "gpu_overrides": {"vram": "40 GB"}, "node_overrides": {"gpus": 4}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  REQUIRE(sc.cluster.groups.size() == 1);
  CHECK(sc.cluster.groups[0].gpu.vram_bytes == 40e9);
  CHECK(sc.cluster.groups[0].gpu.memory_bandwidth_Bps == 1e12);  // untouched
  CHECK(sc.cluster.groups[0].node.gpus == 4);
  CHECK(sc.cluster.groups[0].count == 3);
  CHECK_THAT(scenario_error(scenario_with(R"({"nodes": [{"type": "unit-node-2", "count": 1, "gpu_overrides": {"vram": "lots"}}]})")),
             Contains("/cluster/nodes/0/gpu_overrides/vram: expected a size"));
}

TEST_CASE("a task in a format no GPU of the cluster can run is rejected", "[scenario][errors]") {
  const std::string msg = scenario_error(scenario_with(
      R"({"nodes": [{"type": "unit-node-2", "count": 1, "gpu_overrides": {"peak_flops": {"bf16": "0 TFLOP/s", "fp32": "0 TFLOP/s", "int8": "1 TFLOP/s"}}}]})"));
  CHECK_THAT(msg, Contains("/workflows/w/tasks/0: task \"t\" computes in bf16, which GPU type \"unit-gpu\"") &&
                      Contains("cannot run"));
}

TEST_CASE("a broken workflow is reported once, not again by every stream using it", "[scenario][errors]") {
  const std::string msg = scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "lots"}})"));
  CHECK_THAT(msg, Contains("/workflows/w/tasks/0/work/flop: expected an amount of work"));
  CHECK_THAT(msg, !Contains("unknown workflow"));
}

TEST_CASE("a collective's algorithm must be able to run its operation", "[workflow][errors]") {
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": 2, "collective": {"op": "all-gather", "bytes": "1 GB", "algo": "tree"}}]})"),
             Contains("/tasks/0/collective/algo: tree cannot run all-gather"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": 2, "collective": {"op": "all-to-all", "bytes": "1 GB", "algo": "ring"}}]})"),
             Contains("/tasks/0/collective/algo: ring cannot run all-to-all"));
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": 2, "collective": {"op": "all-reduce", "bytes": "1 GB", "overlap": 2}}]})"),
             Contains("/tasks/0/collective/overlap: expected a number from 0.0 to 1.0"));
  CHECK(workflow_error(R"({"tasks": [{"name": "a", "gpus": 2, "collective": {"op": "send-recv", "bytes": "1 GB", "algo": "direct"}}]})") == "");
}

TEST_CASE("a number too large for a double is malformed JSON, not a crash", "[workflow][errors]") {
  // Found by the fuzzer.
  CHECK_THAT(workflow_error(R"({"tasks": [{"name": "a", "gpus": 1e999, "work": {"flop": "1 TFLOP"}}]})"),
             Contains("wf.json: malformed JSON: number overflow"));
}

TEST_CASE("cluster storage needs a positive bandwidth and nothing else unknown", "[scenario][errors]") {
  const auto with_storage = [](const std::string& storage) {
    return scenario_error(scenario_with(R"({"nodes": [{"type": "unit-node-2", "count": 1}], "storage": )" + storage + "}"));
  };
  CHECK(with_storage(R"({"bandwidth": "7 GB/s", "latency": "100 us"})") == "");
  CHECK_THAT(with_storage(R"({"latency": "100 us"})"), Contains("/cluster/storage/bandwidth"));
  CHECK_THAT(with_storage(R"({"bandwidth": "0 GB/s"})"), Contains("/cluster/storage/bandwidth: expected a bandwidth above 0"));
  CHECK_THAT(with_storage(R"({"bandwidth": "7 GB/s", "iops": 5})"), Contains("/cluster/storage/iops: unknown field"));
}

TEST_CASE("edits made with --set are bounded: an array grows by one at most, and a pointer must lead somewhere", "[input]") {
  const std::string scenario = scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})", R"(, "tenants": [{"name": "a"}], "seed": 1)");
  const auto error_of = [&](std::vector<fleetsim::ScenarioEdit> edits) {
    try {
      fleetsim::parse_scenario(scenario, "s.json", fleetsim::test::data_dir(), edits);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A million-element index once allocated a million nulls (std::bad_alloc at larger ones).
  CHECK_THAT(error_of({{"/tenants/1000000", R"({"name": "z"})"}}),
             Contains("s.json: /tenants/1000000: cannot set this field (--set): /tenants has 1 elements: index 1000000 is past its end"));
  CHECK_THAT(error_of({{"/cluster/nodes/99999999999/count", "1"}}), Contains("index 99999999999 is past its end"));
  CHECK_THAT(error_of({{"/seed/x", "1"}}), Contains("/seed is the number 1, which has no field \"x\""));
  CHECK_THAT(error_of({{"/tenants/01", "{}"}}), Contains("/tenants is an array: expected an index from 0 to 1 (or -)"));
  CHECK_THAT(error_of({{"/a~2b", "1"}}), Contains("a ~ in a pointer must be ~0 or ~1"));
  // Appending at the end, by index or "-", and changing in place work.
  const fleetsim::Scenario appended = fleetsim::parse_scenario(scenario, "s.json", fleetsim::test::data_dir(), std::vector<fleetsim::ScenarioEdit>{{"/tenants/1", R"({"name": "b"})"}, {"/tenants/-", R"({"name": "c"})"}, {"/seed", "9"}, {"/workload/0/tenant", "a"}});
  CHECK(appended.tenants.size() == 3);
  CHECK(appended.seed == 9);
}

TEST_CASE("arrivals a stream's rate implies until the horizon are bounded before any is made", "[input]") {
  const std::string wf = R"({"name": "t", "work": {"flop": "1 TFLOP"}})";
  const auto with_arrival = [&](const std::string& arrival) {
    return scenario_error(R"({"name": "s", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "horizon": "1 h",
      "workflows": {"w": {"tasks": [)" + wf + R"(]}}, "workload": [{"workflow": "w", "arrival": )" + arrival + "}]}");
  };
  CHECK_THAT(with_arrival(R"({"process": "periodic", "interval": "1 ns"})"),
             Contains("/workload/0/arrival/interval: would make up to 3.6 x 10^12 arrivals before the horizon, over the 100,000,000"));
  CHECK_THAT(with_arrival(R"({"process": "poisson", "rate": "1e9 /s"})"), Contains("/workload/0/arrival/rate: would make up to"));
  CHECK_THAT(with_arrival(R"({"process": "diurnal", "rate": "30000 /s", "amplitude": 0.5})"), Contains("/workload/0/arrival/rate"));
  CHECK(with_arrival(R"({"process": "poisson", "rate": "1e9 /s", "count": 10})").empty());  // a count bounds it
  CHECK(with_arrival(R"({"process": "poisson", "rate": "10 /s"})").empty());
}

TEST_CASE("a thousand duplicate tenants are reported in a few lines, not half a million", "[input]") {
  std::string tenants = R"(, "tenants": [)";
  for (int i = 0; i < 1000; ++i) tenants += std::string(i > 0 ? ", " : "") + R"({"name": "a"})";
  const std::string error = scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})", tenants + "]"));
  CHECK_THAT(error, Contains("/tenants/1/name: duplicate tenant \"a\""));
  CHECK_THAT(error, Contains("and 994 more like the above: duplicate tenant names"));
  CHECK(std::count(error.begin(), error.end(), '\n') < 20);
}

TEST_CASE("a key given twice in one JSON object is an error at its pointer, not a silent last-one-wins", "[input]") {
  CHECK_THAT(scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"], "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "count": 2}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})"),
             Contains("bad.json: /cluster/nodes/0/count: the key \"count\" is given twice in one object (JSON keeps only the last): give it once"));
  // The same key in different objects is no repeat.
  CHECK(scenario_error(scenario_with(kOneNode, R"({"name": "t", "work": {"flop": "1 TFLOP"}})", R"(, "tenants": [{"name": "a"}])")).empty());
}

TEST_CASE("a field that failed is reported once, not again through the fields that depend on it", "[input]") {
  const std::string msg = scenario_error(R"({"name": "h", "horizon": "soon", "catalog": ["unit-catalog.json"],
      "cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "1 /s"}},
                   {"workflow": "w", "arrival": {"process": "posson", "rate": "1 /s", "count": 5}}]})");
  CHECK_THAT(msg, Contains("/horizon: expected a duration"));
  CHECK_THAT(msg, Contains("/workload/1/arrival/process: expected one of") && Contains("did you mean \"poisson\"?"));
  CHECK_THAT(msg, !Contains("/workload/0/arrival/count"));  // not "no horizon": there is one, malformed
  CHECK_THAT(msg, !Contains("/workload/1/arrival/rate"));   // not "unknown field": the process that knows it was misspelt
}

TEST_CASE("a MIG instance of no memory is refused", "[input]") {
  for (const std::string vram : {"0 GB", "1 B", "0.5 GB"}) {
    CHECK_THAT(scenario_error(R"({"name": "m", "catalog": ["unit-catalog.json"], "cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "mig": {"slices": 2, "vram": ")" +
                              vram + R"("}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})"),
               Contains("/cluster/nodes/0/mig/vram: expected at least 1 GB for each instance") && Contains("found " + fleetsim::format_number(fleetsim::parse_quantity(vram, fleetsim::Dimension::bytes)) + " B"));
  }
}
