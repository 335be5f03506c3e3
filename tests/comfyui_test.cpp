// The ComfyUI importer's registry (models/comfyui.json): file names to model families, families whose
// stages the catalog has, video latents and their sizes, a user's additions, --strict; and a corpus of
// 65 real saved graphs (tests/data/comfyui-corpus, with their provenance) imported as ComfyUI runs them.
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "../sim/src/import/comfyui_registry.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/import.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using Catch::Contains;

namespace {

const detail::ComfyRegistry& registry() { return detail::builtin_comfyui_registry(); }

const TaskSpec* find_task(const Workflow& wf, const std::string& name) {
  for (const TaskSpec& t : wf.tasks) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool is_sampler(const TaskSpec& t) {
  const std::string cls = t.name.substr(0, t.name.find('#'));
  return cls == "KSampler" || cls == "KSamplerAdvanced" || cls == "SamplerCustom" || cls == "SamplerCustomAdvanced";
}

// The last task whose node class starts with `prefix` (a graph's VAE decode), a model step.
const TaskSpec& last_decode(const Workflow& wf, const std::string& prefix = "VAEDecode") {
  const TaskSpec* found = nullptr;
  for (const TaskSpec& t : wf.tasks) found = t.name.rfind(prefix, 0) == 0 ? &t : found;
  REQUIRE(found != nullptr);
  REQUIRE(found->architecture != nullptr);
  return *found;
}

// Whether one of the workflow's notes says `text`.
bool noted(const Workflow& wf, const std::string& text) {
  return std::any_of(wf.assumptions.begin(), wf.assumptions.end(), [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

// A HunyuanVideo text-to-video graph in the API format, its decoder's class and opening of inputs as given.
std::string hunyuan_video_graph(int width, int height, int length, const std::string& decoder = R"("VAEDecode", "inputs": {)", int batch = 1) {
  return R"({"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "hunyuan_video_t2v_720p_bf16.safetensors"}},
             "2": {"class_type": "VAELoader", "inputs": {"vae_name": "hunyuan_video_vae_bf16.safetensors"}},
             "3": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": )" + std::to_string(width) + R"(, "height": )" +
         std::to_string(height) + R"(, "length": )" + std::to_string(length) + R"(, "batch_size": )" + std::to_string(batch) + R"(}},
             "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 1}},
             "5": {"class_type": )" + decoder + R"("samples": ["4", 0], "vae": ["2", 0]}}})";
}

// How a decode is cut, leaving out below what memory the cut applies (a fallback's vram_below).
StepShape::Tiles cut(StepShape::Tiles tiles) {
  tiles.vram_below = 0;
  return tiles;
}

std::string corpus(const std::string& file) { return test::source_dir() + "/tests/data/comfyui-corpus/" + file; }

Workflow import_file(const std::string& path) { return import_comfyui(read_text_file(path), path, Catalog::builtin()); }

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every registry family's stages are an architecture or operator, and a model, the catalog has", "[import][comfyui]") {
  const Catalog& catalog = Catalog::builtin();
  REQUIRE(registry().families.contains("sdxl"));  // the default for graphs that name no family
  for (const auto& [id, family] : registry().families) {
    for (const detail::ComfyStage* stage : {&family.diffusion, &family.text, &family.vae}) {
      if (stage->empty()) continue;
      INFO(id << ": " << stage->architecture << stage->op << " / " << stage->model);
      if (!stage->architecture.empty()) CHECK(catalog.architectures().contains(stage->architecture));
      if (!stage->op.empty()) CHECK(catalog.op(stage->op) != nullptr);
      CHECK(catalog.model(stage->model) != nullptr);
    }
    if (!family.vae.empty()) CHECK(!family.vae.op.empty());  // a VAE encode is timed from the operator
  }
}

TEST_CASE("loader file names as users have them tell the family, and look-alikes do not", "[import][comfyui]") {
  // File names from ComfyUI's examples and model releases; "" where the name tells nothing.
  const std::map<std::string, std::string> names{
      {"v1-5-pruned-emaonly.safetensors", "sd15"},
      {"v2-1_768-ema-pruned.ckpt", "sd2"},
      {"512-inpainting-ema.safetensors", "sd2"},
      {"sd_xl_base_1.0.safetensors", "sdxl"},
      {"sd_xl_base_1.0_0.9vae.safetensors", "sdxl"},
      {"sd_xl_refiner_1.0.safetensors", "sdxl-refiner"},
      {"sd3_medium_incl_clips_t5xxlfp8.safetensors", "sd3-medium"},
      {"sd3.5_large_fp8_scaled.safetensors", "sd35-large"},
      {"sd3.5_medium.safetensors", "sd3-medium"},
      {"flux1-dev.safetensors", "flux-dev"},
      {"flux1-schnell-fp8.safetensors", "flux-schnell"},
      {"flux1-dev-kontext_fp8_scaled.safetensors", "flux-kontext"},
      {"flux1-fill-dev.safetensors", "flux-fill"},
      {"ae.safetensors", "flux-dev"},
      {"t5xxl_fp16.safetensors", "t5-xxl"},
      {"umt5_xxl_fp8_e4m3fn_scaled.safetensors", "umt5-xxl"},  // holds "t5", is not FLUX's T5
      {"oldt5_xxl_fp8_e4m3fn_scaled.safetensors", "cosmos"},
      {"wan2.1_t2v_1.3B_fp16.safetensors", "wan21-1.3b"},
      {"wan2.1_i2v_480p_14B_fp16.safetensors", "wan21-14b"},
      {"wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors", "wan22-a14b-high"},
      {"wan2.2_i2v_low_noise_14B_fp16.safetensors", "wan22-a14b-low"},
      {"wan2.2_ti2v_5B_fp16.safetensors", "wan22-5b"},
      {"wan_2.1_vae.safetensors", "wan21-14b"},
      {"wan2.2_vae.safetensors", "wan22-5b"},
      {"hunyuan_video_t2v_720p_bf16.safetensors", "hunyuan-video"},
      {"hunyuanvideo1.5_720p_t2v_fp16.safetensors", "hunyuan-video-1.5"},
      {"llava_llama3_fp8_scaled.safetensors", "llava-llama3"},
      {"ltx-video-2b-v0.9.5.safetensors", "ltxv"},
      {"ltxv-13b-0.9.7-dev.safetensors", "ltxv-13b"},
      {"mochi_preview_bf16.safetensors", "mochi"},
      {"qwen_image_fp8_e4m3fn.safetensors", "qwen-image"},
      {"qwen_image_edit_2509_fp8_e4m3fn.safetensors", "qwen-image-edit"},
      {"qwen_2.5_vl_7b_fp8_scaled.safetensors", "qwen2.5-vl"},
      {"hidream_i1_dev_bf16.safetensors", "hidream"},
      {"llama_3.1_8b_instruct_fp8_scaled.safetensors", "llama-3.1-8b"},
      {"svd_xt.safetensors", "svd"},
      {"cosmos_predict2_2B_t2i.safetensors", "cosmos"},
      {"vae.safetensors", ""},  // not FLUX's ae.safetensors
      {"clip_l.safetensors", ""},
      {"dreamshaper_8.safetensors", ""},
  };
  for (const auto& [name, family] : names) {
    const detail::ComfyFamily* found = registry().family_of_file(name);
    INFO(name);
    CHECK((found == nullptr ? std::string() : found->id) == family);
  }
}

TEST_CASE("a Wan 2.2 A14B graph is two 14B experts at its video size, not one FLUX image", "[import][comfyui]") {
  const Workflow wan = import_file(corpus("wan22-t2v-14b.json"));
  const TaskSpec* high = find_task(wan, "KSamplerAdvanced#57");
  const TaskSpec* low = find_task(wan, "KSamplerAdvanced#58");
  REQUIRE(high != nullptr);
  REQUIRE(low != nullptr);
  // Both are fp8 files: a byte per parameter, models of their own.
  CHECK(high->model == "wan2.2-a14b-high-noise (fp8)");
  CHECK(low->model == "wan2.2-a14b-low-noise (fp8)");
  for (const TaskSpec* t : {high, low}) {
    CHECK(t->architecture->id == "wan21-14b-dit");
    CHECK(t->shape.width == 1280);
    CHECK(t->shape.height == 704);
    CHECK(t->shape.frames == 57);
    CHECK(t->steps == 10);  // 20 steps split between the experts at step 10
  }
  // Against one 1024x1024 FLUX image of 20 steps (what it was costed as before): 15 latent frames of
  // 44 x 80 patches against 64 x 64, with attention growing as the square, is two orders of magnitude.
  const Workflow flux = import_file(corpus("flux-dev.json"));
  double wan_flop = 0, flux_flop = 0;
  for (const TaskSpec& t : wan.tasks) wan_flop += is_sampler(t) ? t.flop : 0;
  for (const TaskSpec& t : flux.tasks) flux_flop += is_sampler(t) ? t.flop : 0;
  CHECK(wan_flop > 50 * flux_flop);
  // Both experts' weights are models of their own: a GPU holding one still loads the other.
  CHECK(high->weights_bytes == Approx(Catalog::builtin().model("wan2.2-a14b-high-noise")->weights_bytes / 2));
  bool said = false;
  for (const std::string& note : wan.assumptions) said = said || (note.find("KSamplerAdvanced#57") != std::string::npos &&
                                                                      note.find("a byte per parameter (an fp8 file)") != std::string::npos);
  CHECK(said);
  // The VAE decode's family comes from the sampler, whose file is fp8: its own weights are not. Wan 2.1's causal
  // 3D decoder decodes the video's 57 frames together, not each as an image.
  bool decoded = false;
  for (const TaskSpec& t : wan.tasks) {
    if (t.name.rfind("VAEDecode", 0) != 0) continue;
    decoded = true;
    CHECK(t.model == "video-vae");
    REQUIRE(t.architecture != nullptr);
    CHECK(t.architecture->id == "wan21-vae-decoder");
    CHECK(t.shape.frames == 57);
    CHECK(t.shape.batch == 1);
  }
  CHECK(decoded);
}

TEST_CASE("HunyuanVideo's VAE decodes the clip in 3D: tiled as VAEDecodeTiled's widgets say, or whole where it fits", "[import][comfyui]") {
  // The shipped ComfyUI example graph: VAE Decode (Tiled) at 256, 64, 64 and 8: tiles of 32 latent pixels
  // overlapping by 8, 16 latent frames overlapping by 2 (nodes.py's conversion).
  const Workflow tiled = import_file(corpus("hunyuanvideo-t2v.json"));
  const TaskSpec& decode = last_decode(tiled, "VAEDecodeTiled");
  CHECK(decode.architecture->id == "hunyuan-video-vae-decoder");
  CHECK(decode.shape.tiles == StepShape::Tiles{.size = 32, .overlap = 8, .frames = 16, .frame_overlap = 2});
  // VAEDecode: the whole clip in one call where it fits, ComfyUI's fallback tiles (a guess) where it would not.
  const Workflow small = import_comfyui(hunyuan_video_graph(848, 480, 65), "small.json", Catalog::builtin());
  const TaskSpec* whole = find_task(small, "VAEDecode#5");
  REQUIRE(whole != nullptr);
  CHECK(whole->architecture->id == "hunyuan-video-vae-decoder");
  CHECK(whole->shape.frames == 65);
  CHECK(whole->shape.tiles == StepShape::Tiles{});
  const std::string big_graph = hunyuan_video_graph(1280, 720, 129);
  const Workflow big = import_comfyui(big_graph, "big.json", Catalog::builtin());
  CHECK(cut(find_task(big, "VAEDecode#5")->shape.tiles) == StepShape::Tiles{.size = 32, .overlap = 8, .frames = 999, .frame_overlap = 1});
  const TaskSpec& fallback = *find_task(big, "VAEDecode#5");
  CHECK(fallback.working_set_bytes == Approx(video_decode_peak_bytes(*fallback.architecture, fallback.shape, fallback.dtype)));  // a tile's peak
  CHECK(fallback.working_set_bytes < 80e9);
  CHECK(noted(big, "falls back after running out of memory"));
  CHECK(noted(big, "with its weights past 80 GB (an A100's or H100's: no GPU given)"));
  CHECK_THAT(error_of([&] { import_comfyui(big_graph, "big.json", Catalog::builtin(), {.strict = true}); }), Contains("256-pixel tiles"));
  CHECK(error_of([&] { import_comfyui(hunyuan_video_graph(848, 480, 65), "small.json", Catalog::builtin(), {.strict = true}); }).empty());
  // Two videos: each decodes alone (ComfyUI's batch_number where one clip fills the memory), so the choice is one's.
  CHECK(find_task(import_comfyui(hunyuan_video_graph(848, 480, 65, R"("VAEDecode", "inputs": {)", 2), "two.json", Catalog::builtin()), "VAEDecode#5")->shape.tiles ==
        StepShape::Tiles{});
  // VAEDecodeTiled's widgets as nodes.py converts them: a temporal overlap over half the temporal size is halved
  // (40 -> 20 frames, 5 latent), an overlap over a quarter of the tile becomes a quarter (200 -> 64 pixels, 8 latent).
  const Workflow widgets = import_comfyui(hunyuan_video_graph(848, 480, 65, R"("VAEDecodeTiled", "inputs": {"tile_size": 256, "overlap": 200, "temporal_size": 64, "temporal_overlap": 40, )"),
                                          "tiled.json", Catalog::builtin());
  CHECK(find_task(widgets, "VAEDecodeTiled#5")->shape.tiles == StepShape::Tiles{.size = 32, .overlap = 8, .frames = 16, .frame_overlap = 5});
  CHECK_THAT(error_of([&] { import_comfyui(hunyuan_video_graph(848, 480, 65, R"("VAEDecodeTiled", "inputs": {"tile_size": 32, )"), "t.json", Catalog::builtin()); }),
             Contains("/5/inputs/tile_size: expected a number from 64 to 4096"));
}

TEST_CASE("a VAE decode falls back to tiles where the GPU it runs on cannot hold it whole (the one named or a scenario's smallest)", "[import][comfyui][vae]") {
  // HunyuanVideo at 848 x 480 x 33 with VAEDecode (its transformer in fp8, 12.8 GB, to fit an RTX 4090): its whole
  // decode's estimated peak (about 28 GB) fits an L40S's 48 GB, not an RTX 4090's 24 GB, where ComfyUI's fallback
  // tiles run, the GPU and its memory named in the note.
  std::string text = hunyuan_video_graph(848, 480, 33);
  text.replace(text.find("720p_bf16"), 9, "720p_fp8_e4m3fn");
  const TaskSpec whole = last_decode(import_comfyui(text, "h.json", Catalog::builtin()));
  REQUIRE(whole.shape.tiles == StepShape::Tiles{});
  const double peak = video_decode_peak_bytes(*whole.architecture, whole.shape, whole.dtype);
  INFO("the whole decode's estimated peak: " << peak / 1e9 << " GB");
  const GpuType& small = *Catalog::builtin().gpu("rtx-4090");
  const GpuType& large = *Catalog::builtin().gpu("l40s");
  REQUIRE(small.vram_bytes < peak);
  REQUIRE(peak <= large.vram_bytes);
  const StepShape::Tiles fallback{.size = 32, .overlap = 8, .frames = 999, .frame_overlap = 1};  // 256 // 8 latent pixels
  const Workflow on_small = import_comfyui(text, "h.json", Catalog::builtin(), {.gpu = &small});
  CHECK(cut(last_decode(on_small).shape.tiles) == fallback);
  // Only below the whole decode's need (its peak with the VAE's weights, to a whole MB above), wherever the workflow
  // goes: a larger GPU's first try succeeds.
  CHECK(last_decode(on_small).shape.tiles.vram_below == std::ceil((peak + last_decode(on_small).weights_bytes) / 1e6) * 1e6);
  CHECK(last_decode(on_small).working_set_bytes < small.vram_bytes);
  CHECK(noted(on_small, "past rtx-4090's 24 GB: decoded as ComfyUI falls back"));
  CHECK(last_decode(import_comfyui(text, "h.json", Catalog::builtin(), {.gpu = &large})).shape.tiles == StepShape::Tiles{});
  // A scenario imports its graphs for its cluster's smallest GPU, where a prompt may run.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-decode-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Remove {
    std::filesystem::path dir;
    ~Remove() { std::filesystem::remove_all(dir); }
  } remove{dir};
  std::ofstream(dir / "h.json") << text;
  const auto imported_on = [&](const std::string& nodes) {
    return parse_scenario(R"({"name": "d", "cluster": {"nodes": )" + nodes + R"(}, "workflows": {"h": "h.json"}, "workload": [{"workflow": "h", "arrival": {"process": "once"}}]})",
                          "d.json", dir.string())
        .workflows.front();
  };
  const auto decode_on = [&](const std::string& nodes) { return cut(last_decode(imported_on(nodes)).shape.tiles); };
  // A MIG instance is named as a slice of its GPU, not as the whole GPU it is part of.
  const Workflow on_slices = imported_on(R"([{"type": "hgx-h100-8", "count": 1, "mig": {"slices": 3}}])");
  CHECK(cut(last_decode(on_slices).shape.tiles) == fallback);
  CHECK(noted(on_slices, "past h100-sxm MIG slice (one of 3)'s 26.7 GB: decoded as ComfyUI falls back"));
  CHECK(decode_on(R"([{"type": "l40s-pcie-8", "count": 1}])") == StepShape::Tiles{});
  CHECK(decode_on(R"([{"type": "rtx4090-pcie-8", "count": 1}])") == fallback);
  // Both: the L40S decodes whole and the RTX 4090 in the fallback tiles, each as a cluster of its type alone has
  // it; the tiles (and the task's working set, which must fit the smaller GPU) say where.
  const Workflow mixed = imported_on(R"([{"type": "l40s-pcie-8", "count": 1}, {"type": "rtx4090-pcie-8", "count": 1}])");
  const TaskSpec& both = last_decode(mixed);
  StepShape::Tiles below = fallback;
  below.vram_below = both.shape.tiles.vram_below;
  CHECK(both.shape.tiles == below);
  CHECK(both.shape.tiles.vram_below > peak);
  CHECK(both.shape.tiles.vram_below <= large.vram_bytes);
  CHECK(both.working_set_bytes < small.vram_bytes);
  // The L40S holds the whole decode's working set (its peak: vram_below less the weights), the 4090 the tiles'.
  CHECK(both.working_set_on(large.vram_bytes) == Approx(both.shape.tiles.vram_below - both.weights_per_gpu_bytes()));
  CHECK(both.working_set_on(large.vram_bytes) >= peak);
  CHECK(both.working_set_on(small.vram_bytes) == both.working_set_bytes);
  CHECK(noted(mixed, "(the failed attempt left out); whole where a prompt runs on a GPU of"));
  CHECK(noted(mixed, "(as l40s's 48 GB)"));
  const ComputeModel compute;
  const Workflow l40s_alone = imported_on(R"([{"type": "l40s-pcie-8", "count": 1}])"), rtx_alone = imported_on(R"([{"type": "rtx4090-pcie-8", "count": 1}])");
  CHECK(compute.of(both, large, 1).total_s() == compute.of(last_decode(l40s_alone), large, 1).total_s());
  CHECK(compute.of(both, small, 1).total_s() == compute.of(last_decode(rtx_alone), small, 1).total_s());
  INFO("decode on the L40S " << compute.of(both, large, 1).total_s() << " s, on the RTX 4090 " << compute.of(both, small, 1).total_s() << " s");
  CHECK(compute.of(both, small, 1).total_s() > compute.of(both, large, 1).total_s());  // the tiles overlap
  // What a real backend replays there: the whole decode's work on the L40S, the tiles' on the 4090.
  const TaskSpec& whole_alone = last_decode(l40s_alone);
  CHECK(work_on(both, large).flop == Approx(whole_alone.flop).epsilon(1e-12));
  CHECK(work_on(both, large).launches == whole_alone.launches);
  CHECK(work_on(both, small).flop == both.flop);
  CHECK(work_on(both, small).flop > work_on(both, large).flop);  // the tiles overlap
  // Written and read back, the tiles keep where they apply.
  const std::string written = workflow_json(mixed);
  CHECK(written.find("\"vram_below\"") != std::string::npos);
  CHECK(workflow_json(parse_workflow(written, "mixed.json (as written)", Catalog::builtin())) == written);
  // The VAE's weights count too: a GPU of the peak's size alone is not enough.
  GpuType exact = large;
  exact.vram_bytes = peak;
  CHECK(cut(last_decode(import_comfyui(text, "h.json", Catalog::builtin(), {.gpu = &exact})).shape.tiles) == fallback);
}

TEST_CASE("a 2D VAE decodes in ComfyUI's three passes of tiles: as VAEDecodeTiled's widgets say, or where one image would not fit", "[import][comfyui]") {
  const auto graph = [](int size, const std::string& decoder, const std::string& vae = "sdxl_vae.safetensors") {
    return R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}},
               "2": {"class_type": "VAELoader", "inputs": {"vae_name": ")" + vae + R"("}},
               "3": {"class_type": "EmptyLatentImage", "inputs": {"width": )" + std::to_string(size) + R"(, "height": )" + std::to_string(size) + R"(, "batch_size": 2}},
               "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 20, "cfg": 7}},
               "5": {"class_type": )" + decoder + R"("samples": ["4", 0], "vae": ["2", 0]}}})";
  };
  // VAEDecodeTiled's defaults (512 and 64 pixels) in latent pixels; an overlap over a quarter of the tile is a quarter.
  const Workflow tiled = import_comfyui(graph(1024, R"("VAEDecodeTiled", "inputs": {"tile_size": 512, "overlap": 64, )"), "tiled.json", Catalog::builtin());
  const TaskSpec tiled_decode = last_decode(tiled);
  CHECK(tiled_decode.architecture->id == "sd-vae-decoder");
  CHECK(tiled_decode.shape.batch == 2);
  CHECK(tiled_decode.shape.tiles == StepShape::Tiles{.size = 64, .overlap = 8});
  CHECK(noted(tiled, "three passes of tiles of 512 pixels overlapping by 64"));
  CHECK(last_decode(import_comfyui(graph(1024, R"("VAEDecodeTiled", "inputs": {"tile_size": 256, "overlap": 128, )"), "t.json", Catalog::builtin())).shape.tiles ==
        StepShape::Tiles{.size = 32, .overlap = 8});
  // Written and read back, its tiles have no frames.
  const std::string written = workflow_json(tiled);
  CHECK(workflow_json(parse_workflow(written, "tiled.json (as written)", Catalog::builtin())) == written);
  // VAEDecode: whole, and nothing said, where one image's decode fits (ComfyUI's estimate, 2,178 x 64 x 2 bytes a
  // latent pixel: 4.6 GB at 1024 x 1024); past 80 GB (4608 x 4608: 92 GB) decode_tiled_'s defaults, a guess.
  const Workflow whole = import_comfyui(graph(1024, R"("VAEDecode", "inputs": {)"), "whole.json", Catalog::builtin());
  CHECK(last_decode(whole).shape.tiles == StepShape::Tiles{});
  CHECK_FALSE(noted(whole, "tiles"));
  const Workflow huge = import_comfyui(graph(4608, R"("VAEDecode", "inputs": {)"), "huge.json", Catalog::builtin());
  CHECK(cut(last_decode(huge).shape.tiles) == StepShape::Tiles{.size = 64, .overlap = 16});
  CHECK(last_decode(huge).shape.tiles.vram_below > 80e9);
  CHECK_THAT(error_of([&] { import_comfyui(graph(4608, R"("VAEDecode", "inputs": {)"), "huge.json", Catalog::builtin(), {.strict = true}); }),
             Contains("--strict: the import would guess") && Contains("in three passes of 512-pixel tiles"));
  CHECK_NOTHROW(import_comfyui(graph(1024, R"("VAEDecodeTiled", "inputs": {)"), "tiled.json", Catalog::builtin(), {.strict = true}));
  // What the decode holds, by the same estimate: a tile's (64 x 64 latent pixels, in bf16) where tiled, one image's where
  // whole, on any GPU (ComfyUI decodes more at once where memory is free, but needs no more than one).
  const auto estimate = [](double latent_pixels, double dtype_bytes = 2) { return 2178.0 * 64 * latent_pixels * dtype_bytes; };
  CHECK(tiled_decode.working_set_bytes == estimate(64 * 64));
  CHECK(last_decode(huge).working_set_bytes == estimate(64 * 64));
  CHECK(last_decode(whole).working_set_bytes == estimate(128 * 128));
  CHECK(last_decode(whole).dtype == Dtype::bf16);
  const GpuType& l40s = *Catalog::builtin().gpu("l40s");
  CHECK(last_decode(import_comfyui(graph(2048, R"("VAEDecode", "inputs": {)"), "w.json", Catalog::builtin(), {.gpu = &l40s})).working_set_bytes ==
        estimate(256 * 256));
  // A V100 has no bf16: ComfyUI decodes in fp32 there, 9.1 GB at 1024 x 1024, whole within its 32 GB.
  const GpuType& v100 = *Catalog::builtin().gpu("v100-sxm2-32gb");
  const TaskSpec on_v100 = last_decode(import_comfyui(graph(1024, R"("VAEDecode", "inputs": {)"), "w.json", Catalog::builtin(), {.gpu = &v100}));
  CHECK(on_v100.dtype == Dtype::fp32);
  CHECK(on_v100.shape.tiles == StepShape::Tiles{});
  CHECK(on_v100.working_set_bytes == estimate(128 * 128, 4));
  // Wan 2.1's causal decoder takes VAEDecodeTiled's tiles as the other video VAEs do (its defaults in latent units:
  // 512 and 64 pixels, 64 and 8 frames over its 8 and 4), without a guess.
  const Workflow wan = import_comfyui(graph(1024, R"("VAEDecodeTiled", "inputs": {)", "wan_2.1_vae.safetensors"), "wan.json", Catalog::builtin());
  CHECK(last_decode(wan).architecture->id == "wan21-vae-decoder");
  CHECK(last_decode(wan).shape.tiles == StepShape::Tiles{.size = 64, .overlap = 8, .frames = 16, .frame_overlap = 2});
  CHECK_NOTHROW(import_comfyui(graph(1024, R"("VAEDecodeTiled", "inputs": {)", "wan_2.1_vae.safetensors"), "wan.json", Catalog::builtin(), {.strict = true}));
}

TEST_CASE("LTX-Video's and Wan 2.2's VAEs take VAEDecodeTiled's tiles and ComfyUI's fallback tiles", "[import][comfyui][vae]") {
  // LTX-Video (32x, 8x in time): VAEDecodeTiled's 512 and 64 pixels, 64 and 8 frames are 16 and 2 latent pixels, 8 and 1 frames.
  const Workflow ltx = import_comfyui(R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "ltx-video-2b-v0.9.5.safetensors"}},
      "3": {"class_type": "EmptyLTXVLatentVideo", "inputs": {"width": 768, "height": 512, "length": 97, "batch_size": 1}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 3}},
      "5": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["4", 0], "vae": ["1", 2], "tile_size": 512, "overlap": 64, "temporal_size": 64, "temporal_overlap": 8}}})",
                                      "ltx.json", Catalog::builtin(), {.strict = true});
  const TaskSpec& tiled = *find_task(ltx, "VAEDecodeTiled#5");
  CHECK(tiled.architecture->id == "ltx-video-vae-decoder");
  CHECK(tiled.shape.tiles == StepShape::Tiles{.size = 16, .overlap = 2, .frames = 8, .frame_overlap = 1});
  // Wan 2.2 5B (16x): VAEDecode whole at 1280 x 704 x 121; at 3840 x 2176 x 241 its estimated peak passes 80 GB, so
  // ComfyUI's fallback: 256 // 16 = 16 latent pixels overlapping by 4, every frame in each, a guess said.
  const auto wan = [](int width, int height, int length) {
    return import_comfyui(R"({"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan2.2_ti2v_5B_fp16.safetensors"}},
        "2": {"class_type": "VAELoader", "inputs": {"vae_name": "wan2.2_vae.safetensors"}},
        "3": {"class_type": "Wan22ImageToVideoLatent", "inputs": {"vae": ["2", 0], "width": )" + std::to_string(width) + R"(, "height": )" +
                              std::to_string(height) + R"(, "length": )" + std::to_string(length) + R"(, "batch_size": 1}},
        "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 5}},
        "5": {"class_type": "VAEDecode", "inputs": {"samples": ["4", 0], "vae": ["2", 0]}}})",
                          "wan.json", Catalog::builtin());
  };
  const Workflow small = wan(1280, 704, 121);
  CHECK(find_task(small, "VAEDecode#5")->architecture->id == "wan22-vae-decoder");
  CHECK(find_task(small, "VAEDecode#5")->shape.tiles == StepShape::Tiles{});
  const Workflow big = wan(3840, 2176, 241);
  const TaskSpec& fallback = *find_task(big, "VAEDecode#5");
  CHECK(cut(fallback.shape.tiles) == StepShape::Tiles{.size = 16, .overlap = 4, .frames = 999, .frame_overlap = 1});
  CHECK(video_decode_peak_bytes(*fallback.architecture, StepShape{.width = 3840, .height = 2176, .frames = 241}, fallback.dtype) > 80e9);
  CHECK(noted(big, "falls back after running out of memory"));
}

TEST_CASE("Mochi's VAE decodes as its own decoder: whole where it fits, in 3D tiles where it does not or VAEDecodeTiled says", "[import][comfyui]") {
  const Workflow shipped = import_file(corpus("mochi-t2v.json"));
  const TaskSpec& decode = last_decode(shipped);
  CHECK(decode.architecture->id == "mochi-vae-decoder");
  CHECK(decode.model == "mochi-vae");
  const auto graph = [](int width, int height, int length, const std::string& decoder) {
    return R"({"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "mochi_preview_bf16.safetensors"}},
               "2": {"class_type": "VAELoader", "inputs": {"vae_name": "mochi_vae.safetensors"}},
               "3": {"class_type": "EmptyMochiLatentVideo", "inputs": {"width": )" + std::to_string(width) + R"(, "height": )" + std::to_string(height) +
           R"(, "length": )" + std::to_string(length) + R"(, "batch_size": 1}},
               "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 4.5}},
               "5": {"class_type": )" + decoder + R"("samples": ["4", 0], "vae": ["2", 0]}}})";
  };
  // 848 x 480 x 163 whole: its estimated peak, four 17 GB tensors at the last level, fits 80 GB; at 1280 x 720 it
  // would not (~154 GB): ComfyUI's fallback tiles, a guess.
  const TaskSpec whole = *find_task(import_comfyui(graph(848, 480, 163, R"("VAEDecode", "inputs": {)"), "w.json", Catalog::builtin()), "VAEDecode#5");
  CHECK(whole.shape.tiles == StepShape::Tiles{});
  CHECK(whole.working_set_bytes == Approx(video_decode_peak_bytes(*whole.architecture, whole.shape, whole.dtype)));
  CHECK(whole.working_set_bytes > 60e9);
  const TaskSpec big = *find_task(import_comfyui(graph(1280, 720, 163, R"("VAEDecode", "inputs": {)"), "b.json", Catalog::builtin()), "VAEDecode#5");
  CHECK(cut(big.shape.tiles) == StepShape::Tiles{.size = 32, .overlap = 8, .frames = 999, .frame_overlap = 1});
  CHECK(big.working_set_bytes < 80e9);
  // VAEDecodeTiled's defaults: 512 pixels overlapping by 64, 64 frames (10 latent at 6x) overlapping by 8 (1 latent).
  CHECK(find_task(import_comfyui(graph(848, 480, 163, R"("VAEDecodeTiled", "inputs": {"tile_size": 512, "overlap": 64, "temporal_size": 64, "temporal_overlap": 8, )"),
                                 "t.json", Catalog::builtin()), "VAEDecodeTiled#5")
            ->shape.tiles == StepShape::Tiles{.size = 64, .overlap = 8, .frames = 10, .frame_overlap = 1});
}

TEST_CASE("video latents set frames and size, and image-to-video nodes encode only an image they are given", "[import][comfyui]") {
  const auto graph = [](const std::string& start_image) {
    return R"({"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan2.2_ti2v_5B_fp16.safetensors"}},
               "2": {"class_type": "VAELoader", "inputs": {"vae_name": "wan2.2_vae.safetensors"}},
               "3": {"class_type": "LoadImage", "inputs": {"image": "cat.png"}},
               "4": {"class_type": "Wan22ImageToVideoLatent", "inputs": {"vae": ["2", 0], )" + start_image +
           R"("width": 1280, "height": 704, "length": 121, "batch_size": 1}},
               "5": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["4", 0], "steps": 30, "cfg": 5}},
               "6": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["2", 0]}}})";
  };
  const Workflow text_to_video = import_comfyui(graph(""), "t2v.json", Catalog::builtin());
  CHECK(find_task(text_to_video, "Wan22ImageToVideoLatent#4") == nullptr);  // no start image: an empty latent only
  const TaskSpec* sampler = find_task(text_to_video, "KSampler#5");
  REQUIRE(sampler != nullptr);
  CHECK(sampler->architecture->id == "wan22-5b-dit");
  CHECK(sampler->shape.frames == 121);
  CHECK(sampler->shape.width == 1280);
  const TaskSpec* decode = find_task(text_to_video, "VAEDecode#6");
  REQUIRE(decode != nullptr);
  CHECK(decode->architecture->id == "wan22-vae-decoder");  // its causal 3D decoder, the video's frames together
  CHECK(decode->model == "wan2.2-vae");
  CHECK(decode->shape.frames == 121);
  CHECK(decode->shape.batch == 1);

  const Workflow image_to_video = import_comfyui(graph(R"("start_image": ["3", 0], )"), "i2v.json", Catalog::builtin());
  const TaskSpec* encode = find_task(image_to_video, "Wan22ImageToVideoLatent#4");
  REQUIRE(encode != nullptr);
  CHECK(encode->model == "wan2.2-vae");

  // A side of 0 keeps the aspect where ComfyUI says so (LatentUpscale).
  const Workflow upscaled = import_comfyui(R"({
      "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 768, "batch_size": 1}},
      "3": {"class_type": "LatentUpscale", "inputs": {"samples": ["2", 0], "upscale_method": "nearest-exact", "width": 1536, "height": 0, "crop": "disabled"}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 10, "cfg": 7}}})",
                                           "up.json", Catalog::builtin());
  CHECK(find_task(upscaled, "KSampler#4")->shape.height == 1152);

  // Values an output passes on (WanCameraEmbedding's width, height and length) reach the inputs they feed.
  const Workflow camera = import_file(corpus("wan21-fun-camera-1.3b.json"));
  const TaskSpec* camera_sampler = find_task(camera, "KSampler#3");
  REQUIRE(camera_sampler != nullptr);
  CHECK(camera_sampler->shape.width == 512);
  CHECK(camera_sampler->shape.frames == 81);
}

TEST_CASE("a user's registry file adds families, file rules and node types, tried before the built-in ones", "[import][comfyui]") {
  const std::string user = R"json({
      "families": {"juggernaut": {"label": "Juggernaut XL (an SDXL merge)",
                                  "diffusion": {"architecture": "sdxl-unet", "model": "sdxl-base-1.0"}}},
      "files": [{"contains": ["juggernaut"], "family": "juggernaut"}],
      "nodes": {"MySharpen": "pass", "MyUpscaler": {"role": "upscale", "widgets": ["factor"]}}})json";
  const std::string graph = R"({
      "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "juggernautXL_v9.safetensors"}},
      "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
      "3": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["2", 0], "steps": 30, "cfg": 6}},
      "4": {"class_type": "MySharpen", "inputs": {"image": ["3", 0]}},
      "5": {"class_type": "MyUpscaler", "inputs": {"image": ["4", 0]}}})";
  const Workflow plain = import_comfyui(graph, "g.json", Catalog::builtin());
  CHECK_THAT(plain.assumptions[0], Contains("unknown node types passed through") && Contains("MySharpen") && Contains("MyUpscaler"));
  CHECK_THAT(plain.assumptions[1], Contains("KSampler#3") && Contains("SDXL from \"juggernautXL_v9.safetensors\""));

  const Workflow extended = import_comfyui(graph, "g.json", Catalog::builtin(), {.registry_json = user, .registry_file = "mine.json"});
  CHECK_THAT(extended.assumptions[0], Contains("KSampler#3") && Contains("Juggernaut XL (an SDXL merge) from"));
  CHECK(find_task(extended, "MyUpscaler#5") != nullptr);
  for (const std::string& note : extended.assumptions) CHECK_THAT(note, !Contains("unknown node types"));

  const auto bad = [&](const std::string& text) {
    return error_of([&] { import_comfyui(graph, "g.json", Catalog::builtin(), {.registry_json = text, .registry_file = "mine.json"}); });
  };
  CHECK_THAT(bad(R"({"files": [{"contains": ["x"], "family": "nope"}]})"),
             Contains("mine.json: /files/0/family: names family \"nope\", which no \"families\" entry defines"));
  CHECK_THAT(bad(R"({"nodes": {"X": "compute"}})"), Contains("mine.json: /nodes/X: expected a role (source, pass"));
  CHECK_THAT(bad(R"({"families": {"f": {"label": "F", "diffusion": {"model": "m"}}}})"),
             Contains("/families/f/diffusion/architecture: a stage needs an \"architecture\" or an \"operator\""));
  CHECK_THAT(bad(R"({"familes": {}})"), Contains("mine.json: /familes"));
  // An architecture the catalog lacks is the registry's mistake, not the graph's.
  CHECK_THAT(bad(R"({"families": {"juggernaut": {"label": "J", "diffusion": {"architecture": "sdxl-unnet"}}},
                     "files": [{"contains": ["juggernaut"], "family": "juggernaut"}]})"),
             Contains("mine.json: /families/juggernaut/diffusion/architecture: the catalog lacks architecture \"sdxl-unnet\"; did you mean \"sdxl-unet\"?"));
}

TEST_CASE("a 2D VAE's encode holds ComfyUI's estimate of one image or one tile", "[import][comfyui]") {
  const auto graph = [](const std::string& encoder) {
    return R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd_xl_base_1.0.safetensors"}},
               "2": {"class_type": "LoadImage", "inputs": {"image": "in.png"}},
               "3": {"class_type": "ImageScale", "inputs": {"image": ["2", 0], "upscale_method": "bicubic", "width": 1024, "height": 768, "crop": "disabled"}},
               "4": {"class_type": )" + encoder + R"("pixels": ["3", 0], "vae": ["1", 2]}},
               "5": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["4", 0], "steps": 20, "cfg": 7}}})";
  };
  const auto encode = [](const Workflow& wf) {
    const auto it = std::find_if(wf.tasks.begin(), wf.tasks.end(), [](const TaskSpec& t) { return t.name.rfind("VAEEncode", 0) == 0; });
    REQUIRE(it != wf.tasks.end());
    return *it;
  };
  // memory_used_encode: 1,767 values of the VAE's dtype an image pixel (bf16 by default, fp32 on a V100).
  const auto estimate = [](double pixels, double dtype_bytes = 2) { return 1767.0 * pixels * dtype_bytes; };
  const Workflow whole = import_comfyui(graph(R"("VAEEncode", "inputs": {)"), "e.json", Catalog::builtin());
  CHECK(encode(whole).working_set_bytes == estimate(1024 * 768));
  CHECK_FALSE(noted(whole, "tiles"));
  CHECK(encode(import_comfyui(graph(R"("VAEEncodeTiled", "inputs": {"tile_size": 256, )"), "e.json", Catalog::builtin())).working_set_bytes == estimate(256 * 256));
  const GpuType& v100 = *Catalog::builtin().gpu("v100-sxm2-32gb");
  CHECK(encode(import_comfyui(graph(R"("VAEEncode", "inputs": {)"), "e.json", Catalog::builtin(), {.gpu = &v100})).working_set_bytes ==
        estimate(1024 * 768, 4));
  // Where the image and the checkpoint's weights would not fit, ComfyUI falls back to 512-pixel tiles: a guess, said.
  GpuType small = v100;
  small.vram_bytes = 8e9;
  const Workflow tiled = import_comfyui(graph(R"("VAEEncode", "inputs": {)"), "e.json", Catalog::builtin(), {.gpu = &small});
  CHECK(encode(tiled).working_set_bytes == estimate(512 * 512, 4));
  CHECK(noted(tiled, "held as one 512-pixel tile's"));
  CHECK_THAT(error_of([&] { import_comfyui(graph(R"("VAEEncode", "inputs": {)"), "e.json", Catalog::builtin(), {.strict = true, .gpu = &small}); }),
             Contains("--strict: the import would guess") && Contains("VAEEncode#4"));
}

TEST_CASE("strict imports turn every guess into an error, listed", "[import][comfyui]") {
  const std::string graph = R"({
      "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "my_model.safetensors"}},
      "2": {"class_type": "LoadImage", "inputs": {"image": "in.png"}},
      "3": {"class_type": "VAEEncode", "inputs": {"pixels": ["2", 0], "vae": ["1", 2]}},
      "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 6}}})";
  CHECK_NOTHROW(import_comfyui(graph, "g.json", Catalog::builtin()));
  const std::string error = error_of([&] { import_comfyui(graph, "g.json", Catalog::builtin(), {.strict = true}); });
  CHECK_THAT(error, Contains("--strict: the import would guess") && Contains("KSampler#4") &&
                        Contains("no loader names the model family") && Contains("size 1024x1024 assumed"));
}

TEST_CASE("the corpus of saved graphs imports as ComfyUI runs them: samplers, families, twins", "[import][comfyui][corpus]") {
  const nlohmann::json expected = nlohmann::json::parse(read_text_file(corpus("expected.json")));
  const nlohmann::json manifest = nlohmann::json::parse(read_text_file(corpus("manifest.json")));
  REQUIRE(manifest.size() >= 40);
  std::set<std::string> ui, api;
  for (const auto& [file, facts] : manifest.items()) {
    INFO(file);
    REQUIRE(expected.contains(file));
    (facts["format"] == "ui" ? ui : api).insert(file);
    const Workflow wf = import_file(corpus(file));
    std::set<std::string> models;
    std::size_t samplers = 0;
    for (const TaskSpec& t : wf.tasks) {
      if (!is_sampler(t)) continue;
      ++samplers;
      models.insert(t.model);
    }
    const nlohmann::json& want = expected[file];
    CHECK(samplers == want["samplers"].get<std::size_t>());
    CHECK(models == want["sampler_models"].get<std::set<std::string>>());
    for (const std::string& note : wf.assumptions) CHECK_THAT(note, !Contains("unknown node types"));  // every core type known
    if (want.contains("guess")) {
      bool said = false;
      for (const std::string& note : wf.assumptions) said = said || (note.find("a guess") != std::string::npos && note.find("KSampler") != std::string::npos);
      CHECK(said);
    }
  }
  CHECK(ui.size() >= 20);
  CHECK(api.size() >= 6);

  // UI and API saves of one graph (the same example saved in both formats) give the same tasks and
  // edges. Of the 18 pairs that share a name, three come from different sources and differ.
  for (const char* name : {"flux-kontext-dev", "hidream-i1-dev", "hunyuanvideo-i2v", "mochi-t2v", "qwen-image", "sd15-esrgan-upscale",
                           "sd15-txt2img", "sd2-inpaint", "sd21-hiresfix-esrgan", "sd21-unclip", "sd35-large", "sdxl-base-refiner",
                           "sdxl-lcm-lora", "svd-sdxl-txt2img2vid", "wan21-t2v-1.3b"}) {
    INFO(name);
    const nlohmann::json a = nlohmann::json::parse(workflow_json(import_file(corpus(std::string(name) + ".api.json"))));
    const nlohmann::json u = nlohmann::json::parse(workflow_json(import_file(corpus(std::string(name) + ".json"))));
    std::map<std::string, nlohmann::json> a_tasks, u_tasks;
    for (const auto& t : a["tasks"]) a_tasks[t["name"]] = t;
    for (const auto& t : u["tasks"]) u_tasks[t["name"]] = t;
    std::multiset<std::string> a_edges, u_edges;
    for (const auto& e : a["edges"]) a_edges.insert(e.dump());
    for (const auto& e : u["edges"]) u_edges.insert(e.dump());
    CHECK(a_tasks == u_tasks);
    CHECK(a_edges == u_edges);
  }
}

TEST_CASE("subgraphs are expanded as ComfyUI queues them: scoped ids, boundaries, nesting, instances of their own", "[import][comfyui]") {
  // A hand-made UI workflow: one subgraph (two prompts, a sampler, a nested decode subgraph) used by two
  // instances fed differently, and a third instance bypassed; its API twin names nodes instance:node.
  const std::string dir = test::source_dir() + "/tests/data/comfyui/";
  const Workflow ui = import_file(dir + "subgraphs.json");
  const Workflow api = import_file(dir + "subgraphs.api.json");
  const nlohmann::json u = nlohmann::json::parse(workflow_json(ui)), a = nlohmann::json::parse(workflow_json(api));
  CHECK(u["tasks"] == a["tasks"]);
  CHECK(u["edges"] == a["edges"]);
  REQUIRE(ui.tasks.size() == 8);  // 4 per running instance, none from the bypassed one
  CHECK(find_task(ui, "KSampler#10:3")->steps == 30);  // set by a PrimitiveNode outside, through the subgraph's input
  CHECK(find_task(ui, "KSampler#11:3")->steps == 20);  // that input unlinked: the inner widget stands
  CHECK(find_task(ui, "KSampler#11:3")->shape.width == 832);
  REQUIRE(find_task(ui, "VAEDecode#11:4:1") != nullptr);  // the nested subgraph's node
  CHECK(find_task(ui, "VAEDecode#11:4:1")->shape.batch == 2);

  const auto error = [](const std::string& text) {
    return error_of([&] { import_comfyui(text, "g.json", Catalog::builtin()); });
  };
  // A definition that contains an instance of itself.
  CHECK_THAT(error(R"({"nodes": [{"id": 1, "type": "aaaa"}], "links": [],
                       "definitions": {"subgraphs": [{"id": "aaaa", "nodes": [{"id": 1, "type": "aaaa"}], "links": []}]}})"),
             Contains("g.json: /definitions/subgraphs/0/nodes/0: subgraph aaaa contains itself (aaaa > aaaa)"));
  // Each level holding two of the next, 24 deep: 2^24 copies, stopped at the node budget, not after them.
  std::string levels;
  for (int i = 0; i < 24; ++i) {
    const std::string inner = i < 23 ? "l" + std::to_string(i + 1) : "CLIPTextEncode";
    levels += std::string(i ? ", " : "") + R"({"id": "l)" + std::to_string(i) + R"(", "nodes": [{"id": 1, "type": ")" + inner + R"("}, {"id": 2, "type": ")" + inner + R"("}], "links": []})";
  }
  CHECK_THAT(error(R"({"nodes": [{"id": 1, "type": "l0"}], "links": [], "definitions": {"subgraphs": [)" + levels + "]}}"),
             Contains("the workflow expands to more than 100,000 nodes, its subgraphs' copies counted"));
  CHECK_THAT(error(R"({"nodes": [], "links": [], "definitions": {"subgraphs": [{"name": "x"}]}})"),
             Contains("g.json: /definitions/subgraphs/0: expected a subgraph definition with a string \"id\" and a \"nodes\" array"));
  CHECK_THAT(error(R"({"nodes": [{"id": 1, "type": "s"}], "links": [], "definitions": {"subgraphs": [{"id": "s", "nodes": [], "links": [{"id": 1}]}]}})"),
             Contains("g.json: /definitions/subgraphs/0/links/0: expected a link"));
}

TEST_CASE("every importer's output reads back through the workflow loader, the same workflow again", "[import]") {
  // The corpus of real ComfyUI graphs (both formats) and the WfCommons instances: what `fleetsim import`
  // writes must be a workflow file the loader takes, and writing it again gives the same bytes.
  std::vector<std::pair<std::string, Workflow>> imported;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/tests/data/comfyui-corpus")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "expected.json" || entry.path().filename() == "manifest.json") continue;
    imported.emplace_back(entry.path().string(), import_file(entry.path().string()));
  }
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/scenarios/wfcommons")) {
    if (entry.path().extension() != ".json") continue;
    imported.emplace_back(entry.path().string(), import_wfcommons(read_text_file(entry.path().string()), entry.path().string(), *Catalog::builtin().gpu("h100-sxm")));
  }
  REQUIRE(imported.size() > 60);
  for (const auto& [file, wf] : imported) {
    INFO(file);
    const std::string written = workflow_json(wf);
    const Workflow again = parse_workflow(written, file + " (as written)", Catalog::builtin());
    CHECK(workflow_json(again) == written);
  }
}

TEST_CASE("an imported graph's attention runs on the kernels the import names, written out and read back", "[import][comfyui]") {
  const std::string graph = hunyuan_video_graph(848, 480, 65);
  const Workflow flash = import_comfyui(graph, "g.json", Catalog::builtin());
  const Workflow cudnn = import_comfyui(graph, "g.json", Catalog::builtin(), {.attention = AttentionBackend::cudnn});
  REQUIRE(flash.tasks.size() == cudnn.tasks.size());
  for (std::size_t i = 0; i < cudnn.tasks.size(); ++i) {
    if (!cudnn.tasks[i].architecture) continue;
    CHECK(flash.tasks[i].shape.attention == AttentionBackend::flash2);
    CHECK(cudnn.tasks[i].shape.attention == AttentionBackend::cudnn);
    CHECK(cudnn.tasks[i].flop == flash.tasks[i].flop);  // the same kernels, timed on other constants
  }
  CHECK(std::find(cudnn.assumptions.begin(), cudnn.assumptions.end(), "attention on cuDNN's kernels, as PyTorch 2.11 runs it on Hopper") != cudnn.assumptions.end());
  const std::string text = workflow_json(cudnn);
  CHECK_THAT(text, Contains(R"("attention": "cudnn")"));
  CHECK_THAT(workflow_json(flash), !Contains(R"("attention")"));
  const Workflow again = parse_workflow(text, "again.json", Catalog::builtin());
  for (const TaskSpec& t : again.tasks) {
    if (t.architecture) CHECK(t.shape.attention == AttentionBackend::cudnn);
  }
  // A scenario's ComfyUI entry names it too, checked like every field.
  const std::string entry = R"({"comfyui": ")" + test::source_dir() + R"(/tests/data/comfyui/subgraphs.api.json", "attention": "fa3"})";
  CHECK_THAT(test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "workflows": {"w": )" + entry +
                                  R"(}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})"),
             Contains("/workflows/w/attention") && Contains("expected flash2") && Contains("found \"fa3\""));
}
