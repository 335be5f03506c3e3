// The ComfyUI importer: node types become tasks, model steps at the graph's shapes (operator profiles
// where no architecture fits); what it assumed is listed; unknown node types are listed; a costs file
// names them. Philly's job log becomes a job-trace CSV.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unistd.h>

#include "fleetsim/catalog.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/import.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/units.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using Catch::Contains;

namespace {

const TaskSpec& task(const Workflow& wf, const std::string& name) {
  for (const TaskSpec& t : wf.tasks) {
    if (t.name == name) return t;
  }
  FAIL("no task " << name);
  throw;
}

std::string import_error(const std::string& json, const std::string& costs = "") {
  try {
    import_comfyui(json, "graph.json", Catalog::builtin(), {.node_costs_json = costs, .node_costs_file = "costs.json", .strict = true});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an SDXL hires-fix graph becomes six tasks, model steps at the graph's sizes", "[import]") {
  const std::string path = test::source_dir() + "/scenarios/comfyui/sdxl-hires-fix.json";
  const std::string text = read_text_file(path);
  REQUIRE(is_comfyui_prompt(text));
  const Workflow wf = import_comfyui(text, path, Catalog::builtin());
  CHECK(wf.tasks.size() == 6);  // 2 text encodes, 2 samplers, a VAE decode, an upscale
  // 30 steps at 1024x1024 over a batch of 2 latents, each with its negative prompt (cfg 7): batch 4;
  // then 15 steps at 1.5x per side.
  const TaskSpec& base = task(wf, "KSampler#3");
  const TaskSpec& hires = task(wf, "KSampler#11");
  REQUIRE(base.architecture);
  CHECK(base.architecture->id == "sdxl-unet");
  CHECK(base.steps == 30);
  CHECK(base.shape.batch == 4);
  CHECK(base.shape.width == 1024);
  CHECK(base.shape.context == 77);  // a short prompt: one CLIP chunk
  CHECK(base.shape.runtime == Runtime::comfyui);
  CHECK(base.dtype == Dtype::fp16);
  CHECK(base.flop == Approx(30 * kernels_flop(step_kernels(*base.architecture, base.shape, base.dtype))));
  CHECK(hires.steps == 15);
  CHECK(hires.shape.width == 1536);
  // 2.25x the pixels is more than 2.25x the work per step: self-attention grows with their square.
  CHECK(hires.flop / 15 > 2.3 * base.flop / 30);
  CHECK(base.model == "sdxl-base-1.0");
  CHECK(task(wf, "ImageUpscaleWithModel#13").model == "real-esrgan-x4plus");
  CHECK(task(wf, "ImageUpscaleWithModel#13").shape.width == 1536);  // the decoded image it upscales
  const TaskSpec& decode = task(wf, "VAEDecode#8");
  CHECK(decode.architecture->id == "sd-vae-decoder");
  CHECK(decode.shape.batch == 2);
  CHECK(decode.dtype == Dtype::bf16);
  CHECK(task(wf, "CLIPTextEncode#6").architecture->id == "clip-g-text");
  // Both prompts feed both samplers; the first sampler's latent feeds the second through the upscale.
  CHECK(wf.edges.size() == 7);
  CHECK(wf.inputs(static_cast<std::uint32_t>(&task(wf, "KSampler#11") - wf.tasks.data())).size() == 3);
}

TEST_CASE("unknown ComfyUI node types are listed, and a costs file names them", "[import][errors]") {
  const std::string graph = R"({
    "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned.safetensors"}},
    "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
    "3": {"class_type": "KSampler", "inputs": {"steps": 20, "model": ["1", 0], "latent_image": ["2", 0]}},
    "4": {"class_type": "MagicSharpen", "inputs": {"samples": ["3", 0]}},
    "5": {"class_type": "MagicSharpen", "inputs": {"samples": ["4", 0]}},
    "6": {"class_type": "Watermark", "inputs": {"samples": ["5", 0]}}})";
  CHECK_THAT(import_error(graph), Contains("unknown ComfyUI node types") && Contains("MagicSharpen (nodes 4, 5)") &&
                                      Contains("Watermark (node 6)"));
  // Not strict: they pass data through, and the import says it guessed so.
  const Workflow guessed = import_comfyui(graph, "graph.json", Catalog::builtin());
  CHECK(guessed.tasks.size() == 1);  // the sampler
  REQUIRE_FALSE(guessed.assumptions.empty());
  CHECK_THAT(guessed.assumptions[0], Contains("unknown node types passed through as if they did no GPU work, a guess") &&
                                         Contains("MagicSharpen (nodes 4, 5)") && Contains("Watermark (node 6)"));
  const std::string costs = R"({"MagicSharpen": {"flop": "2 TFLOP", "bytes": "1 GB"}, "Watermark": {"free": true}})";
  const Workflow wf = import_comfyui(graph, "graph.json", Catalog::builtin(), {.node_costs_json = costs, .node_costs_file = "costs.json"});
  CHECK(wf.tasks.size() == 3);  // the sampler and two sharpen passes; the watermark is free
  CHECK(task(wf, "MagicSharpen#4").flop == 2e12);
  CHECK(task(wf, "KSampler#3").architecture->id == "sd15-unet");
  CHECK(task(wf, "KSampler#3").shape.batch == 2);  // no cfg given: ComfyUI's default 8, with the negative prompt
  CHECK_THAT(import_error(graph, R"({"MagicSharpen": {"flops": "2 TFLOP"}, "Watermark": {"free": true}})"),
             Contains("costs.json: /MagicSharpen/flops: unknown field"));
}

TEST_CASE("malformed ComfyUI graphs are rejected with the node named", "[import][errors]") {
  CHECK_THAT(import_error(R"({"1": {"class_type": "KSampler", "inputs": {"model": ["9", 0]}}})"),
             Contains("/1/inputs/model: links to node \"9\", which is not in the graph"));
  CHECK_THAT(import_error(R"({"1": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0]}},
                              "2": {"class_type": "VAEDecode", "inputs": {"samples": ["1", 0]}}})"),
             Contains("links form a cycle"));
  CHECK_THAT(import_error(R"({"1": {"class_type": "SaveImage", "inputs": {}}})"), Contains("no node that does GPU work"));
  CHECK_THAT(import_error(R"({"1": {"inputs": {}}})"), Contains("/1: expected a node"));
}

TEST_CASE("a scenario runs ComfyUI graphs end to end", "[import][simulation]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/comfyui-studio.json");
  const RunResult run = simulate(sc);
  CHECK(run.summary.workflows.submitted == 600);
  CHECK(run.summary.workflows.completed == 600);
}

TEST_CASE("a FLUX graph is costed as FLUX: T5 text encode, no negative prompt at cfg 1", "[import]") {
  const std::string path = test::source_dir() + "/scenarios/comfyui/flux-dev.json";
  const Workflow wf = import_comfyui(read_text_file(path), path, Catalog::builtin());
  const TaskSpec& encode = task(wf, "CLIPTextEncode#4");
  CHECK(encode.model == "t5-v1_1-xxl-encoder");  // "t5xxl" must not read as SDXL
  CHECK(encode.architecture->id == "t5-xxl-encoder");
  CHECK(encode.shape.tokens == 256);  // ComfyUI pads T5's tokens to 256
  const TaskSpec& sample = task(wf, "KSampler#7");
  CHECK(sample.model == "flux.1-dev");
  CHECK(sample.architecture->id == "flux-dit");
  CHECK(sample.steps == 20);
  CHECK(sample.shape.batch == 1);  // cfg 1: the negative prompt is skipped
  CHECK(sample.shape.width == 1024);
  CHECK(sample.shape.height == 768);
  CHECK(sample.shape.context == 256);
  CHECK(sample.dtype == Dtype::bf16);
  CHECK(task(wf, "VAEDecode#8").architecture->id == "flux-vae-decoder");
}

TEST_CASE("the import says what it assumed: families with their evidence, defaults, unmodelled families", "[import]") {
  const std::string path = test::source_dir() + "/scenarios/comfyui/flux-dev.json";
  const Workflow flux = import_comfyui(read_text_file(path), path, Catalog::builtin());
  REQUIRE(flux.assumptions.size() == flux.tasks.size() + 1);
  CHECK_THAT(flux.assumptions[1], Contains("KSampler#7: flux-dit, 20 steps, 1024x768") && Contains("FLUX.1 dev from \"flux1-dev.safetensors\" (UNETLoader#1)"));
  CHECK_THAT(flux.assumptions.back(), Contains("no GPU work") && Contains("FluxGuidance") && Contains("UNETLoader"));

  // A Wan 2.2 graph's loaders: the high-noise expert and umT5 (not FLUX's T5, though its name holds
  // "t5"); no 1024x1024 default is silent.
  const Workflow wan = import_comfyui(R"({
      "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors"}},
      "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan"}},
      "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["2", 0]}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["3", 0], "negative": ["3", 0], "steps": 20, "cfg": 5}}})",
                                      "wan.json", Catalog::builtin());
  CHECK(task(wan, "CLIPTextEncode#3").model == "umt5-xxl-encoder (fp8)");  // an fp8 file: half the weights
  CHECK(task(wan, "CLIPTextEncode#3").shape.tokens == 512);  // ComfyUI pads umT5 to 512
  CHECK(task(wan, "KSampler#4").model == "wan2.2-a14b-high-noise (fp8)");
  CHECK_THAT(wan.assumptions[0], Contains("umT5-XXL text encoder (Wan) from \"umt5_xxl_fp8_e4m3fn_scaled.safetensors\""));
  CHECK_THAT(wan.assumptions[1], Contains("KSampler#4: wan21-14b-dit") && Contains("Wan 2.2 A14B high-noise expert from") &&
                                     Contains("size 1024x1024 assumed: no node sets it, a guess"));

  // A family the registry knows by name but has no profile for is costed as SDXL, and says so.
  const Workflow cosmos = import_comfyui(R"({
      "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "cosmos_predict2_2B_t2i.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
      "3": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["2", 0], "steps": 20, "cfg": 4}}})",
                                         "cosmos.json", Catalog::builtin());
  CHECK_THAT(cosmos.assumptions[0], Contains("is a Cosmos model, which the importer has no profile for here: costed as SDXL, a guess"));

  // No loader names a family: the default is said to be one.
  const Workflow plain = import_comfyui(R"({
      "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "my_model.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 768, "height": 768, "batch_size": 1}},
      "3": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["2", 0], "steps": 25, "cfg": 7}}})",
                                        "plain.json", Catalog::builtin());
  CHECK_THAT(plain.assumptions[0], Contains("no loader names the model family: SDXL assumed"));
  CHECK_THAT(plain.assumptions[0], !Contains("assumed: no node sets it"));
}

TEST_CASE("costs files get clear errors", "[import][errors]") {
  const std::string graph = R"({"1": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
                                "2": {"class_type": "Blur", "inputs": {"samples": ["1", 0]}}})";
  CHECK_THAT(import_error(graph, R"({"Blur": 5})"), Contains("costs.json: /Blur: expected {\"flop\": ..."));
  CHECK_THAT(import_error(graph, R"({"Blur": {"flop": "1 TFLOP", "dtype": "fp17"}})"), Contains("/Blur/dtype: expected one of"));
}

TEST_CASE("the UI workflow format imports to the same workflow as the API format", "[import]") {
  const std::string api_path = test::source_dir() + "/scenarios/comfyui/sdxl-hires-fix.json";
  const std::string ui_path = test::source_dir() + "/scenarios/comfyui/sdxl-hires-fix.ui.json";
  const std::string ui_text = read_text_file(ui_path);
  REQUIRE(is_comfyui_prompt(ui_text));
  const Workflow api = import_comfyui(read_text_file(api_path), api_path, Catalog::builtin());
  const Workflow ui = import_comfyui(ui_text, ui_path, Catalog::builtin());
  // Widget values by position (the sampler's seed control value skipped), links by slot; the muted
  // preview node is left out.
  REQUIRE(ui.tasks.size() == api.tasks.size());
  for (const TaskSpec& t : api.tasks) {
    CHECK(task(ui, t.name).flop == t.flop);
    CHECK(task(ui, t.name).bytes == t.bytes);
    CHECK(task(ui, t.name).model == t.model);
  }
  REQUIRE(ui.edges.size() == api.edges.size());
  for (std::size_t e = 0; e < api.edges.size(); ++e) {
    CHECK(ui.tasks[ui.edges[e].from].name == api.tasks[api.edges[e].from].name);
    CHECK(ui.tasks[ui.edges[e].to].name == api.tasks[api.edges[e].to].name);
    CHECK(ui.edges[e].bytes == api.edges[e].bytes);
  }
}

TEST_CASE("a UI workflow's editor-only nodes are seen through as ComfyUI runs the graph", "[import]") {
  // Checkpoint -> Reroute -> bypassed LoRA -> KSampler, whose steps come from a PrimitiveNode (5, not
  // the widget's stale 20); a Note and a MarkdownNote beside; a muted LoRA feeds nothing.
  const std::string ui = R"({"nodes": [
      {"id": 1, "type": "CheckpointLoaderSimple", "mode": 0, "inputs": [], "widgets_values": ["sd_xl_base_1.0.safetensors"]},
      {"id": 2, "type": "Reroute", "mode": 0, "inputs": [{"name": "", "type": "*", "link": 1}]},
      {"id": 3, "type": "LoraLoaderModelOnly", "mode": 4, "inputs": [{"name": "model", "type": "MODEL", "link": 2}], "widgets_values": ["x.safetensors", 1.0]},
      {"id": 4, "type": "PrimitiveNode", "mode": 0, "inputs": [], "widgets_values": [5, "fixed"]},
      {"id": 5, "type": "EmptyLatentImage", "mode": 0, "inputs": [], "widgets_values": [1024, 1024, 1]},
      {"id": 6, "type": "CLIPTextEncode", "mode": 0, "inputs": [{"name": "clip", "type": "CLIP", "link": 4}], "widgets_values": ["a cat"]},
      {"id": 7, "type": "KSampler", "mode": 0, "inputs": [{"name": "model", "type": "MODEL", "link": 3}, {"name": "positive", "type": "CONDITIONING", "link": 5},
        {"name": "negative", "type": "CONDITIONING", "link": 6}, {"name": "latent_image", "type": "LATENT", "link": 7},
        {"name": "steps", "type": "INT", "link": 8, "widget": {"name": "steps"}}], "widgets_values": [1, "fixed", 20, 7, "euler", "normal", 1]},
      {"id": 8, "type": "Note", "mode": 0, "widgets_values": ["remember the refiner"]},
      {"id": 9, "type": "MarkdownNote", "mode": 0, "widgets_values": ["# notes"]},
      {"id": 10, "type": "LoraLoaderModelOnly", "mode": 2, "inputs": [{"name": "model", "type": "MODEL", "link": 9}], "widgets_values": ["y.safetensors", 1.0]},
      {"id": 11, "type": "VAEDecode", "mode": 0, "inputs": [{"name": "samples", "type": "LATENT", "link": 10}, {"name": "vae", "type": "VAE", "link": 11}]}],
    "links": [[1, 1, 0, 2, 0, "MODEL"], [2, 2, 0, 3, 0, "MODEL"], [3, 3, 0, 7, 0, "MODEL"], [4, 1, 1, 6, 0, "CLIP"],
              [5, 6, 0, 7, 1, "CONDITIONING"], [6, 6, 0, 7, 2, "CONDITIONING"], [7, 5, 0, 7, 3, "LATENT"], [8, 4, 0, 7, 4, "INT"],
              [9, 1, 0, 10, 0, "MODEL"], [10, 7, 0, 11, 0, "LATENT"], [11, 1, 2, 11, 1, "VAE"]]})";
  const Workflow wf = import_comfyui(ui, "saved.json", Catalog::builtin());
  REQUIRE(wf.tasks.size() == 3);  // text encode, sample, decode
  const auto sampler = std::find_if(wf.tasks.begin(), wf.tasks.end(), [](const TaskSpec& t) { return t.steps > 1; });
  REQUIRE(sampler != wf.tasks.end());
  CHECK(sampler->steps == 5);
  CHECK_THAT(sampler->model, Contains("sdxl"));  // the family reached the sampler through the Reroute and the bypassed LoRA
  for (const std::string& a : wf.assumptions) CHECK_THAT(a, !Contains("Note") && !Contains("PrimitiveNode") && !Contains("Reroute"));

  // In the API format, ComfyUI's primitive nodes give their value to the inputs linked to them.
  const Workflow api = import_comfyui(R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
      "3": {"class_type": "CLIPTextEncode", "inputs": {"text": ["9", 0], "clip": ["1", 1]}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["3", 0], "negative": ["3", 0], "latent_image": ["2", 0],
            "steps": ["8", 0], "cfg": 7, "seed": 1, "sampler_name": "euler", "scheduler": "normal", "denoise": 1}},
      "8": {"class_type": "PrimitiveInt", "inputs": {"value": 12}},
      "9": {"class_type": "PrimitiveStringMultiline", "inputs": {"value": "a cat"}}})", "api.json", Catalog::builtin());
  const auto api_sampler = std::find_if(api.tasks.begin(), api.tasks.end(), [](const TaskSpec& t) { return t.steps > 1; });
  REQUIRE(api_sampler != api.tasks.end());
  CHECK(api_sampler->steps == 12);
}

TEST_CASE("a malformed UI workflow is reported with its pointers", "[import][errors]") {
  CHECK_THAT(import_error(R"({"nodes": [{"id": 1}], "links": []})"), Contains("graph.json: /nodes/0: expected a node with an integer \"id\" and a string \"type\""));
  CHECK_THAT(import_error(R"({"nodes": [{"id": 1, "type": "VAEDecode", "inputs": [{"name": "samples", "link": 9}]}], "links": []})"),
             Contains("/nodes/0/inputs/0/link: link 9 is not in \"links\""));
  CHECK_THAT(import_error(R"({"nodes": [], "links": [[1, 2]]})"), Contains("/links/0: expected a link [id, source node"));
  CHECK_THAT(import_error(R"({"nodes": [{"id": 1, "type": "EmptyLatentImage", "widgets_values": 5}], "links": []})"),
             Contains("/nodes/0/widgets_values: expected an array or an object"));
  CHECK_THAT(import_error(R"({"nodes": [{"id": 1, "type": "EmptyLatentImage"}, {"id": 1, "type": "SaveImage"}], "links": []})"),
             Contains("/nodes/1/id: node id 1 appears twice"));
}

TEST_CASE("WfCommons instances (WfFormat 1.5 and 1.4) import with runtimes and file edges", "[import]") {
  const GpuType& unit = *[] {
    static Catalog c = [] {
      Catalog catalog;
      catalog.add_file(test::data_dir() + "/unit-catalog.json");
      return catalog;
    }();
    return c.gpu("unit-gpu");
  }();
  const std::string path = test::source_dir() + "/scenarios/wfcommons/blast-like.json";
  const std::string text = read_text_file(path);
  REQUIRE(is_wfcommons_instance(text));
  const Workflow wf = import_wfcommons(text, path, unit);
  REQUIRE(wf.tasks.size() == 6);
  CHECK(wf.tasks[1].flop == Approx(120 * 100e12));  // 120 s at the reference's 100 TFLOP/s
  REQUIRE(wf.edges.size() == 8);
  CHECK(wf.edges[0].bytes == 100e6);  // split -> search_01 carries part1.fa only
  // On the unit GPU each task takes its recorded runtime: split, the longest search, merge, plus transfers.
  const std::string v14 = read_text_file(test::data_dir() + "/wf14.json");
  const Workflow chain = import_wfcommons(v14, "wf14.json", unit);
  REQUIRE(chain.edges.size() == 1);
  CHECK(chain.edges[0].bytes == 1e9);
  CHECK(chain.tasks[1].flop == Approx(200e12));
  CHECK_THROWS_WITH(import_wfcommons(R"({"schemaVersion": "1.5", "workflow": {"specification": {"tasks": [{"id": "a"}]}}})", "w.json", unit),
                    Contains("w.json: /workflow/specification/tasks/0: task \"a\" has no runtime"));
  // The run as recorded: its makespan and machines (1.5 under execution, 1.4 beside the tasks).
  REQUIRE(wf.recorded);
  CHECK(wf.recorded->makespan_s == 131.0);
  CHECK(wf.recorded->machines == "1 machine, 8 cores");
  REQUIRE(chain.recorded);
  CHECK(chain.recorded->makespan_s == 3.0);
  CHECK(chain.recorded->machines.empty());
  const std::string bad = R"({"schemaVersion": "1.5", "workflow": {"specification": {"tasks": [{"id": "a"}]},
                             "execution": {"makespanInSeconds": -1, "tasks": [{"id": "a", "runtimeInSeconds": 1}]}}})";
  CHECK_THROWS_WITH(import_wfcommons(bad, "w.json", unit), Contains("w.json: /workflow/execution/makespanInSeconds: expected a non-negative number of seconds, found the number -1"));
  std::string forever = bad;
  forever.replace(forever.find("-1"), 2, "7").replace(forever.find("\"runtimeInSeconds\": 1"), 21, "\"runtimeInSeconds\": 1e300");
  CHECK_THROWS_WITH(import_wfcommons(forever, "w.json", unit),
                    Contains("/workflow/execution/tasks/0/runtimeInSeconds: expected a number of seconds from 0 to 1e9, found the number 1e+300"));
  std::string machines = bad;
  machines.replace(machines.find("-1"), 2, R"(7, "machines": {"nodeName": "n"})");
  CHECK_THROWS_WITH(import_wfcommons(machines, "w.json", unit), Contains("/workflow/execution/machines: expected an array of machines"));
}

TEST_CASE("a scenario runs a WfCommons instance end to end", "[import][simulation]") {
  // Four 100-TFLOP/s GPUs on one NVSwitch node: the fork-join takes split + longest search + merge,
  // plus its transfers: 5 + 120 + 6 s and a little.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "node_overrides": {"gpus": 4}}]},
      "workflows": {"blast": ")" + test::source_dir() + R"(/scenarios/wfcommons/blast-like.json"},
      "workload": [{"workflow": "blast", "arrival": {"process": "once"}}])");
  const RunResult run = simulate(sc);
  CHECK(run.summary.tasks.completed == 6);
  CHECK(run.summary.makespan_s > 131.0);
  CHECK(run.summary.makespan_s < 131.5);
  // The recorded makespan beside the simulated one, with why the platforms differ.
  REQUIRE(run.summary.recorded_runs.size() == 1);
  const RecordedCheck& c = run.summary.recorded_runs[0];
  CHECK(c.workflow == "blast");
  CHECK(c.recorded_s == 131.0);
  CHECK(c.instances == 1);
  CHECK(c.simulated_s == run.summary.makespan_s);
  std::ostringstream text;
  write_summary_text(text, sc, run.summary);
  CHECK_THAT(text.str(), Contains("recorded   blast: makespan 2.18 min as recorded (on 1 machine, 8 cores)") && Contains("the platforms differ"));
  CHECK_THAT(summary_json(run.summary), Contains(R"("recorded_makespan_s": 131.0)") && Contains(R"("recorded_on": "1 machine, 8 cores")"));
}

TEST_CASE("Philly's job log becomes a job-trace CSV that replays, with what was dropped said", "[import][trace]") {
  const std::string file = test::source_dir() + "/tests/data/philly-sample.json";
  const TraceImport imported = import_philly_trace(read_text_file(file), file);
  // Sorted by submission; the 8-GPU job's gang is its last attempt's two machines, its time that attempt's.
  CHECK(imported.csv == "submit_time,tenant,gpus,duration\n0,vc-b,8,1800\n359,vc-a,2,3600\n122400,vc-b,1,30\n");
  CHECK(imported.jobs == 3);
  const auto said = [&](const std::string& text) {
    return std::any_of(imported.notes.begin(), imported.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  CHECK(said("kept 3 of 6 jobs"));
  CHECK(said("dropped 2: no attempt with a start and an end time"));
  CHECK(said("dropped 1: no GPUs in its last attempt"));
  CHECK(said("\"vc-a\", \"vc-b\""));
  CHECK(import_philly_trace(read_text_file(file), file, PhillyTenant::none).csv.starts_with("submit_time,gpus,duration\n0,8,1800\n"));
  CHECK(import_philly_trace(read_text_file(file), file, PhillyTenant::user).csv.find(",u2,8,1800") != std::string::npos);

  // The CSV replays: each job on its gang for its duration.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fleetsim-philly-test";
  std::filesystem::create_directories(dir);
  write_output_file(dir / "jobs.csv", "the trace", [&](std::ostream& o) { o << imported.csv; });
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "tenants": [{"name": "vc-a"}, {"name": "vc-b"}],
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": ")" + (dir / "jobs.csv").string() + R"("}])");
  const RunResult run = simulate(sc);
  std::filesystem::remove_all(dir);
  REQUIRE(run.trace.tasks.size() == 3);
  std::vector<double> gpus, durations;
  for (const TaskRecord& t : run.trace.tasks) {
    gpus.push_back(t.gpu_count);
    durations.push_back(t.end_s - t.compute_start_s);
  }
  std::sort(gpus.begin(), gpus.end());
  std::sort(durations.begin(), durations.end());
  CHECK(gpus == std::vector<double>{1, 2, 8});
  CHECK_THAT(durations, Catch::Matchers::Approx(std::vector<double>{30, 1800, 3600}));
}

TEST_CASE("a malformed Philly log is rejected with the job's pointer, repeated problems counted", "[import][trace][input]") {
  auto error_of = [](const std::string& json) {
    try {
      import_philly_trace(json, "log.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of(R"({"jobs": []})"), Catch::Contains("log.json: expected Philly's cluster job log: an array of jobs"));
  CHECK_THAT(error_of(R"([{"vc": "a", "submitted_time": "yesterday", "attempts": []}])"),
             Catch::Contains("log.json: /0/submitted_time: expected a time such as \"2017-10-03 14:05:59\", found \"yesterday\""));
  // A date no calendar has: February 30th, and the 29th outside a leap year.
  CHECK_THAT(error_of(R"([{"vc": "a", "submitted_time": "2017-02-30 14:05:59", "attempts": []}])"),
             Catch::Contains("/0/submitted_time: expected a time such as"));
  CHECK_THAT(error_of(R"([{"vc": "a", "submitted_time": "2017-02-29 00:00:00", "attempts": []}])"), Catch::Contains("/0/submitted_time"));
  CHECK(error_of(R"([{"vc": "a", "submitted_time": "2016-02-29 00:00:00", "attempts": []}])").empty());
  std::string many = "[";
  for (int i = 0; i < 12; ++i) many += std::string(i > 0 ? "," : "") + "7";
  const std::string error = error_of(many + "]");
  CHECK_THAT(error, Catch::Contains("/4: expected a job object") && !Catch::Contains("/5: expected") &&
                        Catch::Contains("and 7 more like the above: jobs that are not objects"));
  // Fields of the wrong type are not a crash: a job whose vc is not text keeps the tenant "unknown", and odd attempts are skipped.
  const TraceImport odd = import_philly_trace(R"([{"vc": 5, "status": 3, "submitted_time": "2017-10-03 14:05:59", "attempts": [7,
      {"start_time": "2017-10-03 14:06:10", "end_time": "2017-10-03 15:06:10", "detail": [{"gpus": ["g0"]}, 4, {"gpus": 2}]}]},
      {"submitted_time": "2017-10-03 14:05:59", "attempts": "none"}])", "odd.json");
  CHECK(odd.csv == "submit_time,tenant,gpus,duration\n0,unknown,1,3600\n");
}

TEST_CASE("a scenario replays Philly's job log directly, its virtual clusters as tenants", "[import][trace]") {
  const std::string head = R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},)";
  const RunResult run = simulate(test::unit_scenario(head + R"("tenants": [{"name": "vc-a"}, {"name": "vc-b"}],
      "workload": [{"trace": "philly-sample.json", "format": "philly"}])"));
  REQUIRE(run.trace.tasks.size() == 3);
  CHECK(run.summary.tenants[0].workflows.completed == 1);  // vc-a
  CHECK(run.summary.tenants[1].workflows.completed == 2);  // vc-b
  // One tenant for every job.
  CHECK(simulate(test::unit_scenario(head + R"("workload": [{"trace": "philly-sample.json", "format": "philly", "tenant": "default"}])"))
            .summary.workflows.completed == 3);
  // A virtual cluster the scenario does not list.
  CHECK_THAT(test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"],)" + head +
                                  R"("tenants": [{"name": "vc-a"}], "workload": [{"trace": "philly-sample.json", "format": "philly"}]})"),
             Contains("philly-sample.json (converted from the philly log): line 2, tenant: unknown tenant \"vc-b\""));
}

TEST_CASE("a job log in CSV becomes a job-trace CSV through a column mapping, with what was dropped said", "[import][trace]") {
  // Start and end times as dates (a space or a T), a quoted cell with a comma, a 0-GPU job and one that never ran.
  const std::string log =
      "job_id,user,vc,gpu_num,submit_time,start_time,end_time,state\n"
      "1,\"smith, j\",vcA,8,2020-07-01 08:00:00,2020-07-01 08:00:10,2020-07-01 09:00:10,COMPLETED\n"
      "2,doe,vcB,0,2020-07-01 08:01:00,2020-07-01 08:01:00,2020-07-01 08:02:00,COMPLETED\n"
      "3,doe,vcB,1,2020-07-01 08:02:00,,,CANCELLED\n"
      "4,lee,vcA,2.0,2020-07-01T07:59:00,2020-07-01T08:30:00,2020-07-01T08:30:30,COMPLETED\n";
  const JobCsvColumns columns = parse_job_csv_columns("submit=submit_time,gpus=gpu_num,start=start_time,end=end_time,tenant=vc");
  const TraceImport imported = import_job_csv(log, "helios.csv", columns);
  CHECK(imported.csv == "submit_time,tenant,gpus,duration\n0,vcA,2,30\n60,vcA,8,3600\n");
  const auto said = [&](const std::string& text) {
    return std::any_of(imported.notes.begin(), imported.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  CHECK(said("kept 2 of 4 jobs"));
  CHECK(said("dropped 1: no GPUs"));
  CHECK(said("dropped 1: no run time"));
  // Seconds in any number form, a duration column, no tenant column.
  CHECK(import_job_csv("submit,gpus,duration\n1.5e3,4,2.24e+06\n1000,1,10\n", "j.csv", parse_job_csv_columns("submit=submit,gpus=gpus,duration=duration")).csv ==
        "submit_time,gpus,duration\n0,1,10\n500,4,2240000\n");
}

TEST_CASE("an import keeps a time window, some tenants, or large jobs only, and says what it filtered out", "[import][trace]") {
  const std::string file = test::source_dir() + "/tests/data/philly-sample.json";
  const std::string log = read_text_file(file);
  // The kept jobs were submitted 0 s, 359 s and 122,400 s after the first.
  TraceFilter late;
  late.from_s = 3600;
  const TraceImport after = import_philly_trace(log, file, PhillyTenant::vc, late);
  CHECK(after.csv == "submit_time,tenant,gpus,duration\n0,vc-b,1,30\n");
  CHECK(std::find(after.notes.begin(), after.notes.end(), "filtered out 2: submitted before the window") != after.notes.end());
  TraceFilter early;
  early.to_s = 3600;
  CHECK(import_philly_trace(log, file, PhillyTenant::vc, early).csv == "submit_time,tenant,gpus,duration\n0,vc-b,8,1800\n359,vc-a,2,3600\n");
  TraceFilter vc_a;
  vc_a.tenants = {"vc-a"};
  CHECK(import_philly_trace(log, file, PhillyTenant::vc, vc_a).csv == "submit_time,tenant,gpus,duration\n0,vc-a,2,3600\n");
  TraceFilter large;
  large.min_gpus = 2;
  const TraceImport big = import_philly_trace(log, file, PhillyTenant::vc, large);
  CHECK(big.jobs == 2);
  CHECK(std::find(big.notes.begin(), big.notes.end(), "filtered out 1: fewer GPUs than the minimum") != big.notes.end());
}

TEST_CASE("a malformed job CSV or column mapping is rejected naming the line, the column and the expectation", "[import][trace][input]") {
  auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of([] { parse_job_csv_columns("submit=a,gpus=b"); }), Catch::Contains("--columns") && Catch::Contains("duration=COLUMN, or as start=COLUMN and end=COLUMN"));
  CHECK_THAT(error_of([] { parse_job_csv_columns("submit=a,gpus=b,duration=c,start=d,end=e"); }), Catch::Contains("(not both)"));
  CHECK_THAT(error_of([] { parse_job_csv_columns("submit=a,gpu=b,duration=c"); }), Catch::Contains("KEY one of submit, gpus") && Catch::Contains("\"gpu=b\""));
  const JobCsvColumns columns = parse_job_csv_columns("submit=submit,gpus=gpus,duration=duration");
  CHECK_THAT(error_of([&] { import_job_csv("x,y\n1,2\n", "log.csv", columns); }),
             Catch::Contains("log.csv: line 1: expected a column \"submit\" (as the column mapping names it); the header has x, y"));
  CHECK_THAT(error_of([&] { import_job_csv("", "log.csv", columns); }), Catch::Contains("expected a header row"));
  std::string bad = "submit,gpus,duration\n";
  for (int i = 0; i < 8; ++i) bad += "1,many,10\n";
  bad += "yesterday,1,10\n1,1,long\n1,1\n";
  const std::string error = error_of([&] { import_job_csv(bad, "log.csv", columns); });
  CHECK_THAT(error, Catch::Contains("log.csv: line 2, gpus: expected a count of GPUs from 0 to 65536, found \"many\""));
  CHECK_THAT(error, Catch::Contains("and 3 more like the above: gpus cells that are not a count of GPUs"));
  CHECK_THAT(error, Catch::Contains("line 10, submit: expected seconds or a time such as \"2020-07-01 08:00:00\", found \"yesterday\""));
  CHECK_THAT(error, Catch::Contains("line 11, duration: expected seconds from 0 to 1e+09, found \"long\""));
  CHECK_THAT(error, Catch::Contains("line 12: expected 3 cells, found 2"));
}

TEST_CASE("the named job logs import with their own columns: Helios, Acme, Alibaba GPU 2023, PAI 2020", "[import][trace]") {
  const std::string dir = test::source_dir() + "/tests/data/job-logs/";
  const auto import = [&](const char* format, const char* file) {
    const JobLogFormat* log = find_job_log_format(format);
    REQUIRE(log != nullptr);
    return import_job_csv(read_text_file(dir + file), file, log->mapping());
  };
  const auto said = [](const TraceImport& imported, const std::string& text) {
    return std::any_of(imported.notes.begin(), imported.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  // Helios: the duration column, vc as tenant; a 0-GPU job and a cancelled one that never ran are dropped.
  const TraceImport helios = import("helios", "helios-sample.csv");
  CHECK(helios.csv == "submit_time,tenant,gpus,duration\n0,vcB,1,30\n60,vcA,8,3600\n");
  CHECK(said(helios, "kept 2 of 4 jobs"));
  CHECK(said(helios, "kept by final status: COMPLETED 1, FAILED 1"));
  // Acme: times with UTC offsets (+08:00 and Z) are one clock.
  CHECK(import("acme", "acme-sample.csv").csv == "submit_time,gpus,duration\n0,8,3600\n30,1,60\n");
  // Alibaba 2023: half a GPU is replayed on a whole one, and said; a pending pod never ran.
  const TraceImport pods = import("alibaba-gpu2023", "alibaba-gpu2023-sample.csv");
  CHECK(pods.csv == "submit_time,gpus,duration\n0,1,900\n20,8,12899950\n40,2,300\n");
  CHECK(said(pods, "1 jobs asked for a fraction of a GPU (shared GPUs); each is replayed on whole GPUs, rounded up, which asks 0.25 "
                   "GPU-hours where they asked 0.125"));
  CHECK(said(pods, "dropped 1: no run time"));
  CHECK(said(pods, "assumed: a pod still running when the trace was cut"));
  // PAI 2020's task table, without a header: job1's worker instances (2 x 50%) and its parameter server
  // (no GPU) are one 1-GPU job from the first task's start (90 s) to the last task's end (410 s).
  const TraceImport pai = import("pai2020", "pai2020-task-sample.csv");
  CHECK(pai.csv == "submit_time,gpus,duration\n0,1,320\n110,1,60\n");
  CHECK(said(pai, "the log's 5 rows are the tasks of 4 jobs"));
  CHECK(said(pai, "kept 2 of 4 jobs"));
  CHECK(said(pai, "dropped 1: no GPUs"));
  // A mapping given over a named log changes only the keys it names.
  const JobCsvColumns by_start = parse_job_csv_columns("start=start_time,end=end_time", find_job_log_format("helios")->mapping());
  CHECK(by_start.duration.empty());
  CHECK(import_job_csv(read_text_file(dir + "helios-sample.csv"), "h.csv", by_start).csv == "submit_time,tenant,gpus,duration\n0,vcB,1,30\n60,vcA,8,3600\n");
  CHECK(find_job_log_format("slurm") == nullptr);
}

TEST_CASE("a scenario replays a named job log directly", "[import][trace]") {
  const std::string head = R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},)";
  const RunResult run = simulate(test::unit_scenario(head + R"("tenants": [{"name": "vcA"}, {"name": "vcB"}],
      "workload": [{"trace": "job-logs/helios-sample.csv", "format": "helios"}])"));
  CHECK(run.summary.workflows.completed == 2);
  CHECK(simulate(test::unit_scenario(head + R"("workload": [{"trace": "job-logs/pai2020-task-sample.csv", "format": "pai2020"}])"))
            .summary.workflows.completed == 2);
  CHECK_THAT(test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"],)" + head +
                                  R"("workload": [{"trace": "job-logs/helios-sample.csv", "format": "slurm"}]})"),
             Contains("format") && Contains("helios"));
}

TEST_CASE("a trace replayed on GPU types other than its reference says how fast they run it, once a file", "[import][trace]") {
  const auto assumptions = [](const std::string& nodes) {
    const Scenario sc = test::builtin_scenario(R"("cluster": {"nodes": )" + nodes + R"(}, "tenants": [{"name": "vision"}, {"name": "speech"}, {"name": "llm"}],
        "workload": [{"trace": ")" + test::source_dir() + R"(/scenarios/traces/synthetic-jobs.csv", "reference_gpu": "h100-sxm"}])");
    std::vector<std::string> all;
    for (const Workflow& wf : sc.workflows) all.insert(all.end(), wf.assumptions.begin(), wf.assumptions.end());
    return all;
  };
  // On the reference's own GPUs nothing is assumed; beside A100s and V100s, the ratio of their training throughputs, said once
  // with the figures and which of them are estimated.
  CHECK(assumptions(R"([{"type": "hgx-h100-8", "count": 2}])").empty());
  const auto mixed = assumptions(R"([{"type": "hgx-h100-8", "count": 2}, {"type": "hgx-a100-8", "count": 1}, {"type": "dgx1-v100-8", "count": 1}])");
  REQUIRE(mixed.size() == 1);
  CHECK_THAT(mixed.front(), Contains("ran their durations on h100-sxm (reference_gpu) in fp32") &&
                                Contains("a100-sxm-80gb " + format_number(2.91 / 4.89) + "x (2.91/4.89)") &&
                                Contains("v100-sxm2-32gb " + format_number(1 / 4.89) + "x") &&
                                Contains("estimated, not measured (a guess): the figure of v100-sxm2-32gb") && !Contains("bf16"));
}

TEST_CASE("a trace job recorded on one GPU type runs on another at the ratio of their training throughputs", "[import][trace]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-trace-speed-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "one.csv") << "submit_time,gpus,duration\n0,2,100\n";
  const std::string trace = (dir / "one.csv").string();
  const auto run = [&](const std::string& node, const std::string& precision) {
    const Scenario sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": ")" + node + R"(", "count": 1}]},
        "workload": [{"trace": ")" + trace + R"(", "reference_gpu": "p100-pcie-16gb")" + precision + "}]");
    std::string notes;
    for (const Workflow& wf : sc.workflows) {
      for (const std::string& a : wf.assumptions) notes += a;
    }
    const RunResult r = simulate(sc);
    REQUIRE(r.trace.tasks.size() == 1);
    const TaskRecord& t = r.trace.tasks.front();
    return std::make_pair(t.end_s - t.compute_start_s - sc.cluster.groups[0].gpu.launch_overhead_s, notes);
  };
  // 100 s on a P100 (Gavel: 0.74 of a V100 in fp32) take 100 x 0.74 / 4.89 on an H100 SXM (Lambda: 4.89).
  const auto [h100, h100_note] = run("hgx-h100-8", "");
  CHECK(h100 == Approx(100 * 0.74 / 4.89).epsilon(1e-12));
  CHECK_THAT(h100_note, Contains("in fp32 (precision)") && Contains("h100-sxm " + format_number(4.89 / 0.74) + "x (4.89/0.74)") &&
                            !Contains("estimated"));
  // In mixed precision the P100's figure is itself a guess (no tensor cores), and the note says so.
  const auto [amp, amp_note] = run("hgx-h100-8", R"(, "precision": "mixed")");
  CHECK(amp == Approx(100 * 0.33 / 3.27).epsilon(1e-12));
  CHECK_THAT(amp_note, Contains("in mixed (precision)") && Contains("(a guess): the figure of p100-pcie-16gb"));
  // The same GPU type runs the recorded duration exactly; a GPU without a figure in the catalog, the ratio of bf16 peaks.
  CHECK(run("p100-pcie-4", "").first == Approx(100).epsilon(1e-12));
  const GpuType& p100 = *Catalog::builtin().gpu("p100-pcie-16gb");
  const GpuType& mi250x = *Catalog::builtin().gpu("mi250x-gcd");
  const auto [amd, amd_note] = run("mi250x-4", "");
  CHECK(amd == Approx(100 * p100.peak_for(Dtype::bf16) / mi250x.peak_for(Dtype::bf16)).epsilon(1e-12));
  CHECK_THAT(amd_note, Contains("at the ratio of bf16 tensor peaks, mi250x-gcd") && Contains("no training throughput for them"));
  CHECK_THAT(test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workload": [{"trace": ")" + trace + R"(", "precision": "fp16"}]})"),
             Contains("/workload/0/precision") && Contains("\"fp32\", \"mixed\""));
  // A GPU type whose peaks a scenario overrides keeps the catalog's throughput scaled as its peaks, a guess said;
  // one whose throughput it gives runs at that, said too on the recording GPU's own type.
  const auto overridden = [&](const std::string& overrides) {
    const Scenario sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": "p100-pcie-4", "count": 1, "gpu_overrides": )" + overrides + R"(}]},
        "workload": [{"trace": ")" + trace + R"(", "reference_gpu": "p100-pcie-16gb"}])");
    const RunResult r = simulate(sc);
    return std::make_pair(r.trace.tasks.front().end_s - r.trace.tasks.front().compute_start_s - sc.cluster.groups[0].gpu.launch_overhead_s,
                          sc.workflows.front().assumptions);
  };
  const auto [twice, twice_note] = overridden(R"({"peak_flops": {"fp32": "18.6 TFLOP/s"}})");
  CHECK(twice == Approx(50).epsilon(1e-12));
  CHECK_THAT(twice_note.front(), Contains("p100-pcie-16gb 2x (1.48/0.74)") && Contains("(a guess): the figure of p100-pcie-16gb"));
  const auto [given, given_note] = overridden(R"({"training_throughput": {"fp32": 1.48, "mixed": 1, "source": "a test"}})");
  CHECK(given == Approx(50).epsilon(1e-12));
  CHECK_THAT(given_note.front(), Contains("p100-pcie-16gb 2x (1.48/0.74)") && !Contains("estimated"));
  CHECK_THAT(test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "p100-pcie-4", "count": 1,
      "gpu_overrides": {"training_throughput": {"fp32": 2000}}}]}, "workload": [{"trace": ")" + trace + R"("}]})"),
             Contains("training_throughput/fp32: expected a number from 1e-06 to 1000") && Contains("training_throughput/mixed: missing required field"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("two traces recorded on different GPUs keep their own speeds", "[import][trace]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-two-traces-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "one.csv") << "submit_time,gpus,duration\n0,1,100\n";
  const std::string trace = (dir / "one.csv").string();
  // The same gang size from a P100 trace, an H100 trace and the P100 trace in mixed precision: three workflows.
  const Scenario sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "workload": [
      {"trace": ")" + trace + R"(", "reference_gpu": "p100-pcie-16gb"}, {"trace": ")" + trace + R"(", "reference_gpu": "h100-sxm"},
      {"trace": ")" + trace + R"(", "reference_gpu": "p100-pcie-16gb", "precision": "mixed"}, {"trace": ")" + trace + R"(", "reference_gpu": "p100-pcie-16gb"}])");
  std::vector<std::string> ids;
  for (const Stream& s : sc.streams) ids.push_back(sc.workflows[s.workflow].id);
  CHECK(ids == std::vector<std::string>{"trace/1gpu", "trace/1gpu/h100-sxm-fp32", "trace/1gpu/p100-pcie-16gb-mixed", "trace/1gpu"});
  const RunResult r = simulate(sc);
  std::vector<double> times;
  for (const TaskRecord& t : r.trace.tasks) times.push_back(t.end_s - t.compute_start_s - sc.cluster.groups[0].gpu.launch_overhead_s);
  std::sort(times.begin(), times.end());
  REQUIRE(times.size() == 4);
  CHECK(times[0] == Approx(100 * 0.33 / 3.27).epsilon(1e-12));
  CHECK(times[1] == Approx(100 * 0.74 / 4.89).epsilon(1e-12));
  CHECK(times[2] == Approx(100 * 0.74 / 4.89).epsilon(1e-12));
  CHECK(times[3] == Approx(100).epsilon(1e-12));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a ComfyUI graph with a long chain of pass-through nodes imports (no recursion as deep as the chain)", "[import][comfyui]") {
  // Keys sort the sampler first, so the walk from it goes down the whole chain before anything else.
  const auto graph = [](int chain) {
    std::string g = R"({"z999999": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}})";
    std::string prev = "z999999";
    for (int i = chain; i >= 1; --i) {
      const std::string id = "z" + std::to_string(100000 + i);
      g += ", \"" + id + R"(": {"class_type": "LoraLoaderModelOnly", "inputs": {"model": [")" + prev +
           R"(", 0], "lora_name": "x.safetensors", "strength_model": 1.0}})";
      prev = id;
    }
    return g + R"(, "e": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
      "t": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["z999999", 1]}},
      "a": {"class_type": "KSampler", "inputs": {"model": [")" + prev + R"(", 0], "positive": ["t", 0], "negative": ["t", 0],
            "latent_image": ["e", 0], "steps": 20, "cfg": 7, "seed": 1, "sampler_name": "euler", "scheduler": "normal", "denoise": 1}}})";
  };
  const Workflow shallow = import_comfyui(graph(1), "short.json", Catalog::builtin());
  const Workflow deep = import_comfyui(graph(100000), "long.json", Catalog::builtin());
  CHECK(deep.tasks.size() == shallow.tasks.size());
  CHECK(deep.edges.size() == shallow.edges.size());
}

TEST_CASE("ComfyUI widgets outside ComfyUI's own range are errors at their pointers, not negative or runaway work", "[import][comfyui]") {
  const auto graph = [](const std::string& steps, const std::string& width, const std::string& batch) {
    return R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": )" + width + R"(, "height": 1024, "batch_size": )" + batch + R"(}},
      "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["1", 1]}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["3", 0], "negative": ["3", 0], "latent_image": ["2", 0],
            "steps": )" + steps + R"(, "cfg": 7, "seed": 1, "sampler_name": "euler", "scheduler": "normal", "denoise": 1}}})";
  };
  const auto error_of = [](const std::string& text) {
    try {
      import_comfyui(text, "g.json", Catalog::builtin());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(graph("20", "1024", "1")).empty());
  CHECK_THAT(error_of(graph("-30", "1024", "1")), Contains("g.json: /4/inputs/steps: expected a number from 1 to 10000 (ComfyUI's own range), found the number -30"));
  CHECK_THAT(error_of(graph("1e12", "1024", "1")), Contains("/4/inputs/steps: expected a number from 1 to 10000"));
  CHECK_THAT(error_of(graph("20", "0", "1")), Contains("/2/inputs/width: expected a number from 16 to 16384"));
  CHECK_THAT(error_of(graph("20", "1e308", "1")), Contains("/2/inputs/width"));
  CHECK_THAT(error_of(graph("20", "1024", "-1")), Contains("/2/inputs/batch_size: expected a number from 1 to 4096"));
  // A chain of 4x upscales: each in range, together past any GPU; refused at the node it happens, never "inf GB".
  std::string chain = R"({"1": {"class_type": "LoadImage", "inputs": {"image": "a.png"}},
      "2": {"class_type": "UpscaleModelLoader", "inputs": {"model_name": "RealESRGAN_x4plus.pth"}})";
  for (int i = 3; i < 12; ++i) {
    chain += ", \"" + std::to_string(i) + R"(": {"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["2", 0], "image": [")" +
             std::to_string(i == 3 ? 1 : i - 1) + R"(", 0]}})";
  }
  CHECK_THAT(error_of(chain + "}"), Contains("g.json: /7: the image reaches 262,144 x 262,144 pixels, 1 images, through the nodes before it"));
}

TEST_CASE("a WfCommons instance with a negative file size or a repeated task id is rejected at its pointer", "[import][wfcommons]") {
  const auto error_of = [](const std::string& text) {
    try {
      import_wfcommons(text, "wf.json", *Catalog::builtin().gpu("h100-sxm"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto instance = [](const std::string& size, const std::string& second_id) {
    return R"({"schemaVersion": "1.5", "workflow": {"specification": {
        "tasks": [{"id": "a", "parents": [], "outputFiles": ["f"]}, {"id": ")" + second_id + R"(", "parents": ["a"], "inputFiles": ["f"]}],
        "files": [{"id": "f", "sizeInBytes": )" + size + R"(}]},
      "execution": {"tasks": [{"id": "a", "runtimeInSeconds": 1}, {"id": "b", "runtimeInSeconds": 2}]}}})";
  };
  CHECK(error_of(instance("1000", "b")).empty());
  CHECK_THAT(error_of(instance("-93800000000", "b")),
             Contains("wf.json: /workflow/specification/files/0/sizeInBytes: expected a non-negative number of bytes, found the number -93800000000"));
  CHECK_THAT(error_of(instance("1000", "a")), Contains("wf.json: /workflow/specification/tasks/1: duplicate task id \"a\" (task 0 has it too)"));
  std::string future = instance("1000", "b");
  future.replace(future.find("1.5"), 3, "9.9");
  CHECK_THAT(error_of(future), Contains("wf.json: /schemaVersion: expected \"1.4\", \"1.5\" or \"1.6\" (the WfFormat versions this importer reads), found \"9.9\""));
  // 1.6 keeps 1.5's layout (and adds optional metrics, read past).
  std::string v16 = instance("1000", "b");
  v16.replace(v16.find("1.5"), 3, "1.6");
  CHECK(error_of(v16).empty());
}

TEST_CASE("a CSV header that names a column twice is an error, not a guess at which one counts", "[import][trace]") {
  const JobCsvColumns columns = parse_job_csv_columns("submit=submit,gpus=gpus,duration=duration");
  try {
    import_job_csv("submit,gpus,gpus,duration\n0,1,2,10\n", "log.csv", columns);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains("log.csv: line 1: the column \"gpus\" is named twice in the header: name each column once"));
  }
}

TEST_CASE("a scenario's job trace whose header names a column twice is refused", "[import][trace]") {
  CHECK_THAT(test::scenario_error(R"({"name": "x", "catalog": ["unit-catalog.json"], "cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workload": [{"trace": "twice-jobs.csv"}]})"),
             Contains("twice-jobs.csv: line 1: the column \"gpus\" is named twice in the header"));
}

TEST_CASE("an imported job trace reads back through the scenario loader: tenants with commas quoted, jobs past 65,536 GPUs dropped", "[import][trace]") {
  const std::string log =
      "user,gpu_num,submit_time,duration\n"
      "\"smith, j\",8,0,60\n"
      "\"say \"\"hi\"\"\",2,10,60\n"
      "doe,4,30,60\n";
  const TraceImport imported = import_job_csv(log, "log.csv", parse_job_csv_columns("submit=submit_time,gpus=gpu_num,duration=duration,tenant=user"));
  CHECK(imported.csv == "submit_time,tenant,gpus,duration\n0,\"smith, j\",8,60\n10,\"say \"\"hi\"\"\",2,60\n30,doe,4,60\n");
  // Philly's log names each GPU a job held: one of 100,000 is no row a scenario can replay.
  std::string gpus;
  for (int g = 0; g < 100'000; ++g) gpus += (g ? ",\"g" : "\"g") + std::to_string(g) + "\"";
  const TraceImport huge = import_philly_trace(R"([{"vc": "a", "submitted_time": "2017-10-03 14:05:59", "attempts": [{"start_time": "2017-10-03 14:06:10",
      "end_time": "2017-10-03 15:06:10", "detail": [{"ip": "m1", "gpus": [)" + gpus + R"(]}]}]}])", "big.json");
  CHECK(huge.jobs == 0);
  CHECK(std::any_of(huge.notes.begin(), huge.notes.end(), [](const std::string& n) { return n.find("filtered out 1: more than 65,536 GPUs") != std::string::npos; }));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-trace-roundtrip-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_output_file(dir / "jobs.csv", "the trace", [&](std::ostream& o) { o << imported.csv; });
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 2}]},
      "tenants": [{"name": "smith, j"}, {"name": "say \"hi\""}, {"name": "doe"}],
      "workflows": {"unused": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"trace": ")" + (dir / "jobs.csv").string() + R"("}])");
  const RunResult run = simulate(sc);
  std::filesystem::remove_all(dir);
  CHECK(run.trace.tasks.size() == 3);
}
