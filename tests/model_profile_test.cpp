#include <catch2/catch.hpp>
#include <optional>

#include <algorithm>

#include "fleetsim/catalog.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

const Architecture& arch(const char* id) {
  const Architecture* a = Catalog::builtin().architecture(id);
  REQUIRE(a != nullptr);
  return *a;
}

double count_kernels(const std::vector<KernelCall>& calls) {
  double n = 0;
  for (const KernelCall& c : calls) n += c.count;
  return n;
}

}  // namespace

TEST_CASE("model profiles count the FLOP their published configurations imply", "[profiles]") {
  // SD 1.5's UNet at 512x512 with classifier-free guidance (batch 2): 1.68 TFLOP in NVIDIA's TensorRT
  // Stable Diffusion talk, 1.78 in onnx-tool's profile (which counts elementwise work as well).
  const double sd15 = kernels_flop(step_kernels(arch("sd15-unet"), {.batch = 2, .width = 512, .height = 512}, Dtype::fp16));
  CHECK(sd15 == Approx(1.68e12).epsilon(0.06));
  // FLUX.1: 19 double-stream blocks over 4096 image + 512 text tokens and 38 single-stream blocks over
  // both, hidden 3072: 12 h^2 multiply-adds per token per block in its projections and MLPs, plus
  // 24 heads of attention over 4608 tokens, head dimension 128.
  const double h = 3072, tokens = 4096 + 512;
  const double flux = 2 * 12 * h * h * tokens * 57 + 4 * 24 * tokens * tokens * 128 * 57;
  const double modulation_and_embeddings = 0.005 * flux;  // per image, not per token: under 0.5%
  CHECK(kernels_flop(step_kernels(arch("flux-dit"), {.width = 1024, .height = 1024}, Dtype::bf16)) == Approx(flux).margin(modulation_and_embeddings));
  // Llama-3-8B prefill of 2048 tokens with every token's logits: 2 FLOP per parameter per token
  // (8.03e9 parameters less the 128256 x 4096 input embedding, which is a lookup), plus causal
  // attention: 4 x 32 heads x 128 x (2048^2 / 2) per layer, 32 layers.
  const double llama = 2 * (8.03e9 - 128256.0 * 4096) * 2048 + 32 * 4.0 * 32 * 128 * 2048 * 1024;
  CHECK(kernels_flop(step_kernels(arch("llama-3-8b"), {.tokens = 2048, .training = true}, Dtype::bf16)) == Approx(llama).epsilon(0.01));
}

TEST_CASE("Wan 2.1's causal 3D VAE decoder: its convolutions' FLOP level by level counted by hand, a call a latent frame", "[profiles][vae]") {
  // 256 x 128 pixels and 9 frames: 3 latent frames of 32 x 16. Level 0 and the middle decode the 3 latent
  // frames; the first two upsamplings double the frames after the first call's (1 + 2 x 2 = 5, then 9).
  const double p0 = 32 * 16, t = 3, f1 = 5, f3 = 9;
  const auto conv3 = [](double cin, double cout) { return 2 * 27 * cin * cout; };  // a voxel of a 3x3x3 convolution
  const auto conv2 = [](double cin, double cout) { return 2 * 9 * cin * cout; };   // a pixel of a 3x3 one
  const auto time_conv = [](double c) { return 2 * 3 * c * 2 * c; };               // (3, 1, 1) onto twice the channels
  double flop = t * p0 * 2 * 16 * 16;                                               // the 1x1x1 convolution before the decoder
  flop += t * p0 * conv3(16, 384);                                                  // conv_in
  flop += t * p0 * (2 * 2 * conv3(384, 384) + 2 * 384 * 3 * 384 + 2 * 384 * 384);  // the middle's two ResNets, q k v and out
  flop += t * 4 * p0 * p0 * 384;                                                    // its attention within each frame, one head of 384
  flop += t * p0 * 3 * 2 * conv3(384, 384);                                         // level 0: three ResNets
  flop += (t - 1) * p0 * time_conv(384) + f1 * 4 * p0 * conv2(384, 192);            // upsampling in time (not the first frame) and space
  flop += f1 * 4 * p0 * (conv3(192, 384) + 2 * 192 * 384 + 5 * conv3(384, 384));   // level 1: from half the channels, a 1x1x1 shortcut
  flop += (f1 - 1) * 4 * p0 * time_conv(384) + f3 * 16 * p0 * conv2(384, 192);
  flop += f3 * 16 * p0 * 6 * conv3(192, 192);                                       // level 2
  flop += f3 * 64 * p0 * conv2(192, 96);                                            // upsampling in space only
  flop += f3 * 64 * p0 * (6 * conv3(96, 96) + conv3(96, 3));                        // level 3 and the convolution out to RGB
  const Architecture& wan = arch("wan21-vae-decoder");
  const auto calls = [&](double frames) { return step_kernels(wan, {.width = 256, .height = 128, .frames = frames}, Dtype::bf16); };
  CHECK(kernels_flop(calls(9)) == Approx(flop).epsilon(1e-12));
  // One decoder call a latent frame, each later one launching the same kernels: the launches grow by a call's
  // worth with each latent frame (frames 5, 9, 13: 2, 3, 4 latent frames).
  const double per_call = count_kernels(calls(13)) - count_kernels(calls(9));
  CHECK(count_kernels(calls(9)) - count_kernels(calls(5)) == Approx(per_call));
  CHECK(per_call > 400);  // eager: the norms' six kernels, pads, copies and layout changes around ~40 convolutions
  // An image (Qwen-Image's VAE) is the first call alone: every 3x3x3 convolution over two zero frames padded before it.
  const double image = kernels_flop(calls(1)), first_frame = p0 * (2 * 16 * 16 + conv3(16, 384));
  CHECK(image > first_frame);
  CHECK(image < kernels_flop(calls(5)));
  // Compiled, the same convolutions and attention with fewer kernels around them.
  const auto compiled = step_kernels(wan, {.width = 256, .height = 128, .frames = 9, .runtime = Runtime::compiled}, Dtype::bf16);
  CHECK(kernels_flop(compiled) == Approx(flop).epsilon(1e-12));
  CHECK(count_kernels(compiled) < count_kernels(calls(9)));
}

TEST_CASE("Wan 2.2's causal VAE decoder: its convolutions' FLOP level by level counted by hand, widths kept through each upsampling", "[profiles][vae]") {
  // 256 x 128 pixels and 9 frames: 3 latent frames of 16 x 8 (16x). As Wan 2.1's, a call a latent frame, the first
  // two upsamplings doubling the frames after the first call's (1 + 2 x 2 = 5, then 9); but an upsampling keeps its
  // width (the next level's first ResNet block changes it, with a 1x1x1 shortcut), and the head makes 12 channels
  // at half the pixels, unfolded 2 x 2 into RGB.
  const double p0 = 16 * 8, t = 3, f1 = 5, f3 = 9;
  const auto conv3 = [](double cin, double cout) { return 2 * 27 * cin * cout; };
  const auto conv2 = [](double cin, double cout) { return 2 * 9 * cin * cout; };
  const auto time_conv = [](double c) { return 2 * 3 * c * 2 * c; };
  double flop = t * p0 * 2 * 48 * 48;                                                 // the 1x1x1 convolution before the decoder
  flop += t * p0 * conv3(48, 1024);                                                   // conv_in
  flop += t * p0 * (2 * 2 * conv3(1024, 1024) + 2 * 1024 * 3 * 1024 + 2 * 1024 * 1024) + t * 4 * p0 * p0 * 1024;  // the middle
  flop += t * p0 * 6 * conv3(1024, 1024);                                             // level 0
  flop += (t - 1) * p0 * time_conv(1024) + f1 * 4 * p0 * conv2(1024, 1024);           // upsampling in time and space, width kept
  flop += f1 * 4 * p0 * 6 * conv3(1024, 1024);                                        // level 1
  flop += (f1 - 1) * 4 * p0 * time_conv(1024) + f3 * 16 * p0 * conv2(1024, 1024);
  flop += f3 * 16 * p0 * (conv3(1024, 512) + 2 * 1024 * 512 + 5 * conv3(512, 512));  // level 2: a 1x1x1 shortcut where the width halves
  flop += f3 * 64 * p0 * conv2(512, 512);                                             // upsampling in space only
  flop += f3 * 64 * p0 * (conv3(512, 256) + 2 * 512 * 256 + 5 * conv3(256, 256));    // level 3
  flop += f3 * 64 * p0 * conv3(256, 12);                                              // the head, to 2 x 2 pixels of RGB
  const Architecture& wan = arch("wan22-vae-decoder");
  const auto calls = [&](double frames) { return step_kernels(wan, {.width = 256, .height = 128, .frames = frames}, Dtype::bf16); };
  CHECK(kernels_flop(calls(9)) == Approx(flop).epsilon(1e-12));
  // The shortcuts and the unfolding are copies: more bytes than Wan 2.1's layout would move, no FLOP.
  const auto named = [](const std::vector<KernelCall>& list, const std::string& name) {
    return std::count_if(list.begin(), list.end(), [&](const KernelCall& c) { return c.name == name; });
  };
  CHECK(named(calls(9), "upsample.shortcut") == 2 * 3 * 3);  // two kernels, three upsamplings, three calls (the first, second and the rest)
  CHECK(named(calls(9), "unpatchify") == 1);
  // The shortcuts' copies (a write of the repeat, a read and a write of the fold) at the upsampled sizes: two
  // frames from the first call's one where the time doubles, then each later call's frames doubled.
  std::vector<KernelCall> shortcuts;
  for (const KernelCall& c : calls(9)) {
    if (c.name == "upsample.shortcut") shortcuts.push_back(c);
  }
  const double first = 2 * 4 * p0 * 1024 + 2 * 16 * p0 * 1024 + 64 * p0 * 512, later = 2 * 4 * p0 * 1024 + 4 * 16 * p0 * 1024 + 4 * 64 * p0 * 512;
  CHECK(kernels_bytes(shortcuts, Dtype::bf16) == Approx(3 * 2 * (first + (t - 1) * later)).epsilon(1e-12));
  CHECK(named(step_kernels(arch("wan21-vae-decoder"), {.width = 256, .height = 128, .frames = 9}, Dtype::bf16), "upsample.shortcut") == 0);
}

TEST_CASE("LTX-Video's VAE decoder: its convolutions' FLOP level by level counted by hand, depth to space between levels", "[profiles][vae]") {
  // 256 x 128 pixels and 17 frames: 3 latent frames of 8 x 4 (32x, 8x in time). One call over the clip; each level
  // ten 3x3x3 convolutions at its width, then a convolution to 8 x the next width at its size, folded into twice
  // the frames (less the first), height and width; the last convolution to 48 channels, 4 x 4 pixels of RGB each.
  const double p0 = 8 * 4;
  const auto conv3 = [](double cin, double cout) { return 2 * 27 * cin * cout; };
  const auto embed = [](double out) { return 2 * 256 * out + 2 * out * out; };  // the timestep's two linear layers
  double flop = 3 * p0 * conv3(128, 1024);                                           // conv_in
  flop += embed(4 * 1024) + 3 * p0 * (10 * conv3(1024, 1024) + conv3(1024, 8 * 512));
  flop += embed(4 * 512) + 5 * 4 * p0 * (10 * conv3(512, 512) + conv3(512, 8 * 256));
  flop += embed(4 * 256) + 9 * 16 * p0 * (10 * conv3(256, 256) + conv3(256, 8 * 128));
  flop += embed(4 * 128) + 17 * 64 * p0 * 10 * conv3(128, 128);
  flop += embed(2 * 128) + 17 * 64 * p0 * conv3(128, 48);                             // the last embedding and conv_out
  const Architecture& ltx = arch("ltx-video-vae-decoder");
  const auto calls = step_kernels(ltx, {.width = 256, .height = 128, .frames = 17}, Dtype::bf16);
  CHECK(kernels_flop(calls) == Approx(flop).epsilon(1e-12));
  // Two videos: two calls.
  CHECK(kernels_flop(step_kernels(ltx, {.batch = 2, .width = 256, .height = 128, .frames = 17}, Dtype::bf16)) == Approx(2 * flop).epsilon(1e-12));
  // The copies around the convolutions: each upsampling's shortcut folded and repeated (two kernels in eager code,
  // folded into the add compiled), and the 48 channels unfolded into the video at the end, once.
  const auto named = [](const std::vector<KernelCall>& list, const std::string& name) {
    std::vector<KernelCall> out;
    std::copy_if(list.begin(), list.end(), std::back_inserter(out), [&](const KernelCall& c) { return c.name == name; });
    return out;
  };
  CHECK(named(calls, "upsample.shortcut").size() == 2 * 3);
  CHECK(named(step_kernels(ltx, {.width = 256, .height = 128, .frames = 17, .runtime = Runtime::compiled}, Dtype::bf16), "upsample.shortcut").empty());
  CHECK(kernels_bytes(named(calls, "unpatchify"), Dtype::bf16) == Approx(2 * 2 * 17 * 64 * p0 * 48).epsilon(1e-12));  // read and written
  // Without timestep conditioning: no embeddings (nor the noise, scale and shift around them).
  Catalog plain;
  plain.add_json(R"({"architectures": {"plain": {"name": "p", "source": "s", "family": "ltx-vae-decoder", "channels": [1024, 512, 256, 128],
      "latent_channels": 128, "layers_per_block": 5, "vae_factor": 32, "temporal_factor": 8, "patch": 4}}})", "plain.json");
  const auto unconditioned = step_kernels(*plain.architecture("plain"), {.width = 256, .height = 128, .frames = 17}, Dtype::bf16);
  CHECK(kernels_flop(unconditioned) == Approx(flop - embed(4 * 1024) - embed(4 * 512) - embed(4 * 256) - embed(4 * 128) - embed(2 * 128)).epsilon(1e-12));
  CHECK(count_kernels(unconditioned) < count_kernels(calls));
}

TEST_CASE("Mochi's VAE decoder: its convolutions' FLOP level by level counted by hand, frames expanded 3 then 2 times", "[profiles][vae]") {
  // 848 x 480 pixels and 163 frames: 28 latent frames of 60 x 106 (8x, 6x in time). A 1x1x1 convolution to 768
  // channels; 3 + 6 ResBlocks (two 3x3x3 convolutions each) at 768, a Conv1x1 to 512 x 3 x 4 folded into 3 x 28 - 2
  // = 82 frames at twice the pixels; 4 ResBlocks at 512, a Conv1x1 to 256 x 2 x 4 folded into 2 x 82 - 1 = 163
  // frames; 3 ResBlocks at 256, a Conv1x1 to 128 x 4 (pixels only); 3 ResBlocks at 128 and a Conv1x1 to RGB.
  const auto conv3 = [](double c) { return 2 * 27 * c * c; };
  const double v0 = 28 * 60 * 106, v1 = 82 * 120 * 212, v2 = 163 * 240 * 424, v3 = 163 * 480 * 848;
  double flop = v0 * (2 * 12 * 768 + 18 * conv3(768) + 2 * 768 * 6144);
  flop += v1 * (8 * conv3(512) + 2 * 512 * 2048);
  flop += v2 * (6 * conv3(256) + 2 * 256 * 512);
  flop += v3 * (6 * conv3(128) + 2 * 128 * 3);
  const Architecture& mochi = arch("mochi-vae-decoder");
  const StepShape clip{.width = 848, .height = 480, .frames = 163};
  const auto calls = step_kernels(mochi, clip, Dtype::bf16);
  CHECK(kernels_flop(calls) == Approx(flop).epsilon(1e-12));
  const auto out = std::find_if(calls.begin(), calls.end(), [](const KernelCall& c) { return c.name == "output_proj"; });
  REQUIRE(out != calls.end());
  CHECK(out->m == v3);  // 6 (28 - 1) + 1 = 163 frames of 480 x 848
  // Every norm runs over 8 frames at a time: 2 a ResBlock, 4 chunks of 28 frames, 11 of 82, 21 of 163.
  double moments = 0;
  for (const KernelCall& c : calls) moments += c.cls == KernelClass::reduction ? c.count : 0;
  CHECK(moments == 2 * (9 * 4 + 4 * 11 + 3 * 21 + 3 * 21));
  // Two videos: two calls.
  CHECK(kernels_flop(step_kernels(mochi, {.batch = 2, .width = 848, .height = 480, .frames = 163}, Dtype::bf16)) == Approx(2 * flop).epsilon(1e-12));
  // Its levels must make the compression its entry states.
  Catalog wrong;
  CHECK_THROWS_WITH(wrong.add_json(R"({"architectures": {"m": {"name": "m", "source": "s", "family": "mochi-vae-decoder", "channels": [128, 256, 512, 768],
      "res_blocks": [3, 3, 4, 6, 3], "temporal_expansions": [1, 2, 2], "latent_channels": 12, "vae_factor": 8, "temporal_factor": 6}}})", "m.json"),
                    Catch::Contains("temporal_factor: expected 4, the product of its temporal expansions"));
  CHECK_THROWS_WITH(wrong.add_json(R"({"architectures": {"m": {"name": "m", "source": "s", "family": "mochi-vae-decoder", "channels": [128, 256, 512, 768],
      "res_blocks": [3, 3, 4, 6], "temporal_expansions": [1, 2, 3], "latent_channels": 12, "vae_factor": 8, "temporal_factor": 6}}})", "m.json"),
                    Catch::Contains("res_blocks: expected 5 counts"));
  CHECK_THROWS_WITH(wrong.add_json(R"({"architectures": {"m": {"name": "m", "source": "s", "family": "mochi-vae-decoder", "channels": [128, 256, 512, 768],
      "res_blocks": [3, 3, 4.5, 6, 3000], "temporal_expansions": [1, 2, 3], "latent_channels": 12, "vae_factor": 8, "temporal_factor": 6}}})", "m.json"),
                    Catch::Contains("res_blocks: expected an array of 1 to 16 numbers from 0 to 1000"));
  // In tiles of 32 latent pixels overlapping by 8, every frame in each, placed as ComfyUI places them (tile_extents,
  // pinned in the HunyuanVideo case below): 60 rows as 32, 32 and 12; 106 columns as 32, 32, 32, 32 and 10; each a whole call.
  StepShape tiled = clip;
  tiled.tiles = {.size = 32, .overlap = 8, .frames = 1e5};
  REQUIRE_FALSE(tiles_problem(mochi, tiled.tiles).has_value());
  const auto call = [&](double rows, double columns) {
    return kernels_flop(step_kernels(mochi, {.width = columns * 8, .height = rows * 8, .frames = 163}, Dtype::bf16));
  };
  double tiles_flop = 0;
  for (const auto& [rows, nr] : tile_extents(60, 32, 8)) {
    for (const auto& [columns, nc] : tile_extents(106, 32, 8)) tiles_flop += nr * nc * call(rows, columns);
  }
  CHECK(kernels_flop(step_kernels(mochi, tiled, Dtype::bf16)) == Approx(tiles_flop).epsilon(1e-12));
  CHECK(tile_extents(60, 32, 8) == std::vector<std::pair<double, double>>{{12, 1}, {32, 2}});
  // Its peak: the 128-channel level's ResBlock, four tensors of 163 x 480 x 848 x 128 in bf16 (one padded by 2 frames).
  CHECK(video_decode_peak_bytes(mochi, clip, Dtype::bf16) == Approx((3 * 163.0 + 165) * 480 * 848 * 128 * 2).epsilon(1e-12));
  CHECK(video_decode_peak_bytes(mochi, tiled, Dtype::bf16) == Approx((3 * 163.0 + 165) * 256 * 256 * 128 * 2).epsilon(1e-12));  // a 32 x 32 latent tile's
}

TEST_CASE("HunyuanVideo's 3D VAE decoder: its convolutions' FLOP level by level counted by hand, one call over the clip", "[profiles][vae]") {
  // 128 x 64 pixels and 9 frames: 3 latent frames of 16 x 8. The middle and the lowest level decode the 3 latent
  // frames; the lowest upsampling doubles the pixels only, the next two the frames after the first as well
  // (1 + 2 x 2 = 5, then 9). Every convolution but the 1x1x1 ones is 3x3x3; an upsampling keeps its channels.
  const double p0 = 16 * 8, t = 3, f1 = 5, f2 = 9;
  const auto conv3 = [](double cin, double cout) { return 2 * 27 * cin * cout; };  // a voxel of a 3x3x3 convolution
  double flop = t * p0 * 2 * 16 * 16;                                               // post_quant_conv, 1x1x1
  flop += t * p0 * conv3(16, 512);                                                  // conv_in
  flop += t * p0 * (2 * 2 * conv3(512, 512) + 4 * 2 * 512 * 512);                  // the middle's two ResNets, q k v and out
  flop += 4 * (t * p0) * (t * p0) * 512;                                            // one head of 512 over every frame's pixels
  flop += t * p0 * 6 * conv3(512, 512) + t * 4 * p0 * conv3(512, 512);             // level 3, then the upsampling in space
  flop += t * 4 * p0 * 6 * conv3(512, 512) + f1 * 16 * p0 * conv3(512, 512);       // level 2, the upsampling in time and space
  flop += f1 * 16 * p0 * (conv3(512, 256) + 2 * 512 * 256 + 5 * conv3(256, 256));  // level 1: a 1x1x1 shortcut where the width halves
  flop += f2 * 64 * p0 * conv3(256, 256);                                           // its upsampling in time and space
  flop += f2 * 64 * p0 * (conv3(256, 128) + 2 * 256 * 128 + 5 * conv3(128, 128));  // level 0
  flop += f2 * 64 * p0 * conv3(128, 3);                                             // conv_out to RGB
  const Architecture& hunyuan = arch("hunyuan-video-vae-decoder");
  const auto calls = step_kernels(hunyuan, {.width = 128, .height = 64, .frames = 9}, Dtype::bf16);
  CHECK(kernels_flop(calls) == Approx(flop).epsilon(1e-12));
  // Against the 2D stand-in it replaces (every output frame decoded as an image), 3x3x3 convolutions where the
  // frames have been upsampled: more than the 2D decoder's work over the same frames.
  CHECK(kernels_flop(calls) > 1.5 * kernels_flop(step_kernels(arch("video-vae-decoder"), {.batch = 9, .width = 128, .height = 64}, Dtype::bf16)));
}

TEST_CASE("Wan's and LTX-Video's VAEs decode in tiles too, each tile a whole decode", "[profiles][vae]") {
  // Wan 2.1 as HunyuanVideo's case below: 720 x 256 pixels, 17 frames (5 latent frames of 90 x 32) in tiles of 32
  // latent pixels overlapping by 8 and 4 latent frames overlapping by 1; each tile a decode of its own, a latent
  // frame a call as the whole clip's.
  const auto flop = [](const Architecture& a, const StepShape& s) { return kernels_flop(step_kernels(a, s, Dtype::bf16)); };
  for (const char* id : {"wan21-vae-decoder", "wan22-vae-decoder"}) {
    INFO(id);
    const Architecture& wan = arch(id);
    const double f = wan.number("vae_factor", 8);
    StepShape tiled{.width = 32 * f, .height = 90 * f, .frames = 17};
    tiled.tiles = {.size = 32, .overlap = 8, .frames = 4, .frame_overlap = 1};
    REQUIRE_FALSE(tiles_problem(wan, tiled.tiles).has_value());
    const auto call = [&](double latent_frames, double rows) { return flop(wan, {.width = 32 * f, .height = rows * f, .frames = 4 * (latent_frames - 1) + 1}); };
    CHECK(flop(wan, tiled) == Approx(3 * call(4, 32) + call(4, 18) + 3 * call(2, 32) + call(2, 18)).epsilon(1e-12));
    // A tile that covers the clip is the whole decode, cast to fp32 besides.
    StepShape covering = tiled;
    covering.tiles = {.size = 90, .overlap = 8, .frames = 5, .frame_overlap = 1};
    const StepShape whole{.width = 32 * f, .height = 90 * f, .frames = 17};
    CHECK(flop(wan, covering) == Approx(flop(wan, whole)).epsilon(1e-12));
    CHECK(count_kernels(step_kernels(wan, covering, Dtype::bf16)) == count_kernels(step_kernels(wan, whole, Dtype::bf16)) + 1);
    // A latent frame a call: the peak hardly depends on the frames, but the video so far does, and the pixels do.
    CHECK(video_decode_peak_bytes(wan, tiled, Dtype::bf16) < video_decode_peak_bytes(wan, whole, Dtype::bf16));
  }
  // Wan 2.1's peak by hand at 64 x 64 pixels, 5 frames (2 latent frames of 8 x 8), levels of 384, 384, 384, 192 and 96
  // channels, a call's frames 1, 2 after the first upsampling in time, 4 after the second: the largest level is the
  // last (4 frames of 64 x 64, its input and normalized copy, its output, the padded copy of 6 frames, at 192, the
  // width before the upsampling halved it); the frames every causal convolution keeps (two of its input: conv_in's 16,
  // the middle's four at 384; each level's six, the first from the upsampled input, half the width before it after the
  // first level; the two upsamplings in time; conv_out's 96); the video so far twice (5 frames of RGB).
  {
    const double peak = (3 * 4 * 64 * 64 + 6 * 66 * 66) * 192.0;
    const double kept = 2 * 64 * (16 + 4 * 384.0) + 2 * 64 * (384 + 5 * 384.0) + 2 * 64 * 384.0 + 2 * 256 * (192 + 5 * 384.0) + 2 * 256 * 384.0 +
                        2 * 1024 * (192 + 5 * 192.0) + 2 * 4096 * (96 + 5 * 96.0) + 2 * 4096 * 96.0;
    const double video = 2 * 5 * 64 * 64 * 3.0;
    CHECK(video_decode_peak_bytes(arch("wan21-vae-decoder"), {.width = 64, .height = 64, .frames = 5}, Dtype::bf16) == Approx((peak + kept + video) * 2).epsilon(1e-12));
  }
  // LTX-Video: 256 x 640 pixels, 25 frames (4 latent frames of 20 x 8) in tiles of 8 latent pixels overlapping by 2
  // and 2 latent frames overlapping by 1: rows at 0, 6 and 12, frames at 0, 1 and 2, nine calls of 2 x 8 x 8.
  const Architecture& ltx = arch("ltx-video-vae-decoder");
  StepShape tiled{.width = 256, .height = 640, .frames = 25};
  tiled.tiles = {.size = 8, .overlap = 2, .frames = 2, .frame_overlap = 1};
  REQUIRE_FALSE(tiles_problem(ltx, tiled.tiles).has_value());
  CHECK(flop(ltx, tiled) == Approx(9 * flop(ltx, {.width = 256, .height = 256, .frames = 9})).epsilon(1e-12));
  const StepShape whole{.width = 256, .height = 640, .frames = 25};
  CHECK(video_decode_peak_bytes(ltx, tiled, Dtype::bf16) < video_decode_peak_bytes(ltx, whole, Dtype::bf16));
}

TEST_CASE("a video VAE decode in tiles is a whole decoder call a tile, placed as ComfyUI places them", "[profiles][vae]") {
  // ComfyUI's tiled_scale_multidim: starts every tile - overlap from 0 below extent - overlap, each clamped to
  // end inside: 90 latent rows in tiles of 32 overlapping by 8 start at 0, 24, 48 and 72 (the last 18 long).
  using Extents = std::vector<std::pair<double, double>>;
  CHECK(tile_extents(90, 32, 8) == Extents{{18, 1}, {32, 3}});
  CHECK(tile_extents(160, 32, 8) == Extents{{16, 1}, {32, 6}});  // 0, 24, ..., 144
  CHECK(tile_extents(33, 16, 2) == Extents{{5, 1}, {16, 2}});    // frames: 0, 14, 28
  CHECK(tile_extents(20, 32, 8) == Extents{{20, 1}});             // a tile covers it: one call
  // 720 x 256 pixels, 17 frames (5 latent frames of 90 x 32) in tiles of 32 latent pixels overlapping by 8 and
  // 4 latent frames overlapping by 1: rows as above; 32 columns in one tile; frames 0 and 3, of 4 and 2.
  const Architecture& hunyuan = arch("hunyuan-video-vae-decoder");
  StepShape tiled{.width = 256, .height = 720, .frames = 17};
  tiled.tiles = {.size = 32, .overlap = 8, .frames = 4, .frame_overlap = 1};
  const auto call = [&](double latent_frames, double rows) {
    return kernels_flop(step_kernels(hunyuan, {.width = 256, .height = rows * 8, .frames = 4 * (latent_frames - 1) + 1}, Dtype::bf16));
  };
  const double expected = 3 * call(4, 32) + call(4, 18) + 3 * call(2, 32) + call(2, 18);
  CHECK(kernels_flop(step_kernels(hunyuan, tiled, Dtype::bf16)) == Approx(expected).epsilon(1e-12));
  // Smaller calls hold less: the peak is the largest tile's.
  const StepShape whole{.width = 256, .height = 720, .frames = 17};
  CHECK(video_decode_peak_bytes(hunyuan, tiled, Dtype::bf16) < video_decode_peak_bytes(hunyuan, whole, Dtype::bf16));
  // Tiles are for video VAEs (not the 2D stand-in), each overlapping the next by less than itself.
  CHECK_FALSE(tiles_problem(hunyuan, tiled.tiles).has_value());
  CHECK(tiles_problem(arch("video-vae-decoder"), tiled.tiles)->message.find("standing in for a video VAE") != std::string::npos);
  CHECK(tiles_problem(hunyuan, {.size = 8, .overlap = 8, .frames = 4})->field == "overlap");
  CHECK(tiles_problem(hunyuan, {.size = 8, .overlap = 2, .frames = 4, .frame_overlap = 4})->field == "frame_overlap");
  CHECK(tiles_problem(hunyuan, {.size = 16.5, .overlap = 2, .frames = 4})->field == "size");
  // Two videos decode one a call, whole or tiled: twice the kernels, each call's GroupNorm over one sample.
  StepShape two = tiled;
  two.batch = 2;
  const auto one_call = step_kernels(hunyuan, tiled, Dtype::bf16), two_calls = step_kernels(hunyuan, two, Dtype::bf16);
  CHECK(kernels_flop(two_calls) == Approx(2 * kernels_flop(one_call)).epsilon(1e-12));
  CHECK(count_kernels(two_calls) == Approx(2 * count_kernels(one_call)));
  CHECK(video_decode_peak_bytes(hunyuan, two, Dtype::bf16) == video_decode_peak_bytes(hunyuan, tiled, Dtype::bf16));
}

TEST_CASE("a 2D VAE decode in tiles runs ComfyUI's three passes, a whole decoder call a tile", "[profiles][vae]") {
  // A 1024 x 768 image (128 x 96 latent) in tiles of 64 latent pixels overlapping by 8 (VAEDecodeTiled's
  // defaults, 512 and 64 pixels). decode_tiled_'s passes cut (height, width) by (128, 32), (32, 128) and (64, 64):
  //   rows of 128 fit one tile; columns of 32 start at 0, 24, 48, 72 (96 - 8 = 88 ends them): 32, 32, 32, 24;
  //   rows of 32 start at 0, 24, 48, 72, 96 (below 120), each 32 long: 5; columns of 128: 1 of 96;
  //   rows of 64 start at 0, 56, 112 (to 120): 64, 64, 16; columns of 64 start at 0, 56: 64 and 40.
  const Architecture& sd = arch("sd-vae-decoder");
  StepShape tiled{.batch = 2, .width = 768, .height = 1024};
  tiled.tiles = {.size = 64, .overlap = 8};
  REQUIRE_FALSE(tiles_problem(sd, tiled.tiles).has_value());
  const auto call = [&](double rows, double columns) {
    return kernels_flop(step_kernels(sd, {.width = columns * 8, .height = rows * 8}, Dtype::bf16));
  };
  const double one_image = 3 * call(128, 32) + call(128, 24) + 5 * call(32, 96) + 2 * call(64, 64) + 2 * call(64, 40) + call(16, 64) + call(16, 40);
  CHECK(kernels_flop(step_kernels(sd, tiled, Dtype::bf16)) == Approx(2 * one_image).epsilon(1e-12));  // an image at a time
  // Each tile a call of its own: (4 + 5 + 6) x 2 of them, each with the whole decoder's kernels and a cast of its
  // pixels to fp32.
  const double whole_call = count_kernels(step_kernels(sd, {.width = 256, .height = 1024}, Dtype::bf16));
  CHECK(count_kernels(step_kernels(sd, tiled, Dtype::bf16)) == Approx(30 * (whole_call + 1)));
  // Tiles smaller than the image cost more than the whole: the passes decode it three times over, with overlaps.
  const StepShape whole{.batch = 2, .width = 768, .height = 1024};
  const KernelModel h100(*Catalog::builtin().gpu("h100-sxm"));
  CHECK(estimate_step(sd, tiled, h100, Dtype::bf16).time_s > 3 * estimate_step(sd, whole, h100, Dtype::bf16).time_s);
  // A tile covering the image: three whole calls (each pass fits in one).
  StepShape covering = whole;
  covering.tiles = {.size = 256, .overlap = 8};
  CHECK(kernels_flop(step_kernels(sd, covering, Dtype::bf16)) == Approx(3 * kernels_flop(step_kernels(sd, whole, Dtype::bf16))).epsilon(1e-12));
  // A 2D VAE's tiles have no frames, and its narrow passes must still step forward.
  CHECK(tiles_problem(sd, {.size = 64, .overlap = 8, .frames = 4})->field == "frames");
  CHECK(tiles_problem(sd, {.size = 64, .overlap = 8, .frame_overlap = 1})->field == "frame_overlap");
  CHECK(tiles_problem(sd, {.size = 64, .overlap = 32})->field == "overlap");
  CHECK_FALSE(tiles_problem(sd, {.size = 64, .overlap = 31}).has_value());
  CHECK(tiles_problem(sd, {.size = 1})->field == "size");
  CHECK(default_tile_frames(sd) == 0);
  CHECK(default_tile_frames(arch("hunyuan-video-vae-decoder")) == 1e5);
}

TEST_CASE("eager PyTorch launches more kernels than a compiled step and waits on its host", "[profiles]") {
  const KernelModel h100(*Catalog::builtin().gpu("h100-sxm"));
  for (const char* id : {"sdxl-unet", "flux-dit", "sd-vae-decoder", "real-esrgan-x4", "clip-l-text"}) {
    INFO(id);
    const StepShape shape{.batch = 1, .width = 512, .height = 512, .tokens = 77};
    StepShape fused = shape;
    fused.runtime = Runtime::compiled;
    const StepEstimate eager = estimate_step(arch(id), shape, h100, Dtype::bf16);
    const StepEstimate compiled = estimate_step(arch(id), fused, h100, Dtype::bf16);
    CHECK(count_kernels(eager.calls) > count_kernels(compiled.calls));
    CHECK(eager.time_s > compiled.time_s);
    CHECK(compiled.host_wait_s == 0);
    // The same GEMMs and attention either way: layout copies and unfused elementwise work do no FLOP.
    CHECK(kernels_flop(eager.calls) == Approx(kernels_flop(compiled.calls)));
  }
  // CLIP-L over 77 tokens is a few microseconds of work per kernel: the host's 10 us per launch decides.
  const StepEstimate clip = estimate_step(arch("clip-l-text"), {.tokens = 77}, h100, Dtype::bf16);
  CHECK(clip.host_wait_s > clip.compute_bound_s + clip.memory_bound_s);
}

TEST_CASE("a model step is estimated once a process and never answers for another GPU, model or constants", "[profiles][compute]") {
  TaskSpec task;
  task.dtype = Dtype::bf16;
  const StepShape shape{.width = 512, .height = 512};
  set_model_step(task, std::make_shared<const Architecture>(arch("flux-dit")), shape, 4);
  const GpuType h100 = *Catalog::builtin().gpu("h100-sxm");
  const double first = ComputeModel().of(task, h100).total_s();
  // Another run (a new model of compute) with a copy of the GPU elsewhere in memory: the same estimate.
  const GpuType copy = h100;
  CHECK(ComputeModel().of(task, copy).total_s() == first);
  // The same ids with other contents: each its own estimate.
  GpuType slower = h100;
  slower.memory_bandwidth_Bps /= 2;
  CHECK(ComputeModel().of(task, slower).total_s() > first);
  Architecture deeper = arch("flux-dit");
  deeper.numbers["single_blocks"] *= 2;
  TaskSpec other;
  other.dtype = Dtype::bf16;
  set_model_step(other, std::make_shared<const Architecture>(deeper), shape, 4);
  CHECK(ComputeModel().of(other, h100).total_s() > first);
  auto constants = std::make_shared<KernelConstants>(*builtin_kernel_constants());
  constants->eager_dispatch_us *= 10;
  CHECK(ComputeModel(constants).of(task, h100).total_s() > first);
  CHECK(ComputeModel().of(task, h100).total_s() == first);
}

TEST_CASE("a step's kernels run back to back behind a host that launches them", "[profiles]") {
  const GpuType& gpu = *Catalog::builtin().gpu("a100-sxm-80gb");
  const StepShape shape{.batch = 2, .width = 512, .height = 512};
  const Architecture& sd15 = arch("sd15-unet");
  // Without host time, the step is its kernels' sum.
  auto constants = std::make_shared<KernelConstants>(*builtin_kernel_constants());
  constants->eager_dispatch_us = 0;
  const KernelModel free_host(gpu, constants);
  const StepEstimate alone = estimate_step(sd15, shape, free_host, Dtype::fp16);
  double sum = 0;
  for (std::size_t i = 0; i < alone.calls.size(); ++i) sum += alone.calls[i].count * alone.kernels[i].time_s();
  CHECK(alone.time_s == Approx(sum));
  CHECK(alone.time_s == Approx(alone.fixed_s + alone.compute_bound_s + alone.memory_bound_s));
  // With a host far slower than any kernel (1 s a launch), the GPU waits for every launch: the step is
  // the launches plus the last kernel.
  constants->eager_dispatch_us = 1e6;
  const StepEstimate slow = estimate_step(sd15, shape, KernelModel(gpu, constants), Dtype::fp16);
  CHECK(slow.time_s == Approx(count_kernels(slow.calls) * 1.0 + slow.kernels.back().time_s()));
  CHECK(slow.host_wait_s == Approx(slow.time_s - sum));
}

TEST_CASE("an eager convolution reorders its filter on every call", "[profiles]") {
  const StepShape shape{.batch = 2, .width = 512, .height = 512};
  const std::vector<KernelCall> eager = step_kernels(arch("sd15-unet"), shape, Dtype::fp16);
  StepShape graph = shape;
  graph.runtime = Runtime::compiled;
  double filters = 0, larger = 0, filter_bytes = 0, weights = 0;
  for (const KernelCall& c : eager) {
    if (c.cls == KernelClass::gemm && c.taps > 1) {
      larger += c.count;
      weights += c.count * c.n * c.k;  // cout x cin x taps
    }
    if (c.origin != nullptr && c.origin->operation == "conv_weight_layout") {
      filters += c.count;
      filter_bytes += c.count * kernel_bytes(c, Dtype::fp16);
    }
  }
  CHECK(larger > 10);
  CHECK(filters == larger);                           // every 3x3 convolution's filter, none of the 1x1 ones'
  CHECK(filter_bytes == Approx(2 * 2 * weights));     // read and written once, in fp16
  for (const KernelCall& c : step_kernels(arch("sd15-unet"), graph, Dtype::fp16)) {
    CHECK((c.origin == nullptr || c.origin->operation != "conv_weight_layout"));  // channels-last weights under a compiler
  }
}

TEST_CASE("a constant pad fills the padded tensor first and Wan's upsampling runs in fp32 under diffusers", "[profiles]") {
  // Wan 2.1's decoder on three latent frames. F.pad fills the padded tensor before it copies the input in wherever
  // something is padded: every 3x3x3 convolution (its pixels), and a time upsampling's (3, 1, 1) convolution in the
  // second call (two zero frames: the first call only marked its cache); a clone alone where nothing is: 1x1x1
  // convolutions, and the (3, 1, 1) ones in later calls, which join the two frames kept instead.
  StepShape shape{.width = 256, .height = 256, .frames = 9};
  shape.runtime = Runtime::diffusers;
  const std::vector<KernelCall> calls = step_kernels(arch("wan21-vae-decoder"), shape, Dtype::bf16);
  double cubic = 0, cubic_filled = 0, pointwise_filled = 0, time_convs = 0, time_filled = 0, fp32_upsampling = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const KernelCall& c = calls[i];
    if (c.origin != nullptr && c.origin->operation == "frame_upsample" && c.origin->writes == "fp32") fp32_upsampling += c.count;
    if (c.cls != KernelClass::gemm || c.origin != nullptr) continue;
    // A convolution's GEMM: back past its layout changes to its pad, if it has one, and the fill before that.
    std::size_t j = i;
    while (j > 0 && calls[j - 1].origin != nullptr &&
           (calls[j - 1].origin->operation == "conv_layout" || calls[j - 1].origin->operation == "conv_weight_layout")) {
      --j;
    }
    const bool padded = j > 0 && calls[j - 1].origin != nullptr && calls[j - 1].origin->operation == "pad";
    const bool filled = padded && j > 1 && calls[j - 2].origin != nullptr && calls[j - 2].origin->operation == "pad_fill";
    if (filled) {
      CHECK(calls[j - 2].m == calls[j - 1].m);  // the same padded tensor, written where the copy reads and writes
      CHECK(kernel_bytes(calls[j - 2], Dtype::bf16) == Approx(0.5 * kernel_bytes(calls[j - 1], Dtype::bf16)));
    }
    if (c.taps == 27) {
      cubic += c.count;
      cubic_filled += filled ? c.count : 0;
    } else if (c.taps == 3) {
      time_convs += c.count;
      time_filled += filled ? c.count : 0;
    } else if (c.taps == 1 && padded) {
      pointwise_filled += filled ? c.count : 0;
    }
  }
  CHECK(cubic > 20);
  CHECK(cubic_filled == cubic);
  CHECK(pointwise_filled == 0);
  CHECK(time_convs == 2 * 2);  // two time upsamplings, in the second call and the third
  CHECK(time_filled == 2);     // the second call's
  CHECK(fp32_upsampling == 3 * 3);  // the decoder's three upsamplings, in each of the three calls
  shape.runtime = Runtime::compiled;
  for (const KernelCall& c : step_kernels(arch("wan21-vae-decoder"), shape, Dtype::bf16)) {
    CHECK((c.origin == nullptr || c.origin->operation != "pad_fill"));  // the generated pad writes its zeros
  }
}

TEST_CASE("diffusers normalizes Wan's VAE channels in fp32 and ComfyUI in the step's dtype", "[profiles]") {
  // diffusers' WanRMS_norm since its pull request 13316: F.normalize(x.float()).to(x.dtype), then the scaling: the
  // cast, the reduction's read, the divide and the cast back move fp32 where ComfyUI's norm moves the step's bf16.
  StepShape shape{.width = 256, .height = 256, .frames = 1};
  const auto norm_bytes = [&](Runtime runtime, double& fp32_reads) {
    shape.runtime = runtime;
    double bytes = 0;
    fp32_reads = 0;
    for (const KernelCall& c : step_kernels(arch("wan21-vae-decoder"), shape, Dtype::bf16)) {
      if (c.origin == nullptr || c.origin->operation != "channel_rms_norm") continue;
      bytes += c.count * kernel_bytes(c, Dtype::bf16);
      fp32_reads += c.origin->reads == "fp32" ? c.count : 0;
    }
    return bytes;
  };
  double comfy_fp32 = 0, diffusers_fp32 = 0;
  const double comfy = norm_bytes(Runtime::comfyui, comfy_fp32), diffusers = norm_bytes(Runtime::diffusers, diffusers_fp32);
  CHECK(comfy_fp32 == 0);
  CHECK(diffusers_fp32 > 0);
  CHECK(diffusers > 1.5 * comfy);
}

TEST_CASE("replication pads are timed as the indexed copies measured on an H200", "[profiles]") {
  // The three rows measured at HunyuanVideo's VAE shapes (calibrate/data/kernels/h200_replication_pad.csv), each
  // within 5% through the model: a tenth of the H200's bandwidth, where a plain copy would take under a sixth of the time.
  const KernelModel h200(*Catalog::builtin().gpu("h200-sxm"));
  struct Row {
    double voxels, channels, us;
  };
  for (const Row& r : {Row{521640, 512, 1974.23}, Row{4415676, 256, 8290.13}, Row{10181644, 128, 9493.0}}) {
    const KernelCall pad{.cls = KernelClass::indexed_copy, .m = r.voxels, .n = r.channels};
    CHECK(h200.estimate(pad, Dtype::bf16).time_s() == Approx(r.us * 1e-6).epsilon(0.05));
    KernelCall copy = pad;
    copy.cls = KernelClass::activation;
    CHECK(h200.estimate(copy, Dtype::bf16).time_s() < 0.3 * r.us * 1e-6);
  }
  // Each 3x3x3 convolution of HunyuanVideo's decoder pads its input first: an indexed copy eagerly, a generated kernel compiled.
  StepShape shape{.width = 848, .height = 480, .frames = 65};
  for (const Runtime runtime : {Runtime::comfyui, Runtime::diffusers, Runtime::compiled}) {
    shape.runtime = runtime;
    double convs = 0, pads = 0;
    for (const KernelCall& c : step_kernels(arch("hunyuan-video-vae-decoder"), shape, Dtype::fp16)) {
      if (c.cls == KernelClass::gemm && c.taps == 27) convs += c.count;
      if (c.origin == nullptr || (c.origin->operation != "replicate_pad" && c.origin->operation != "norm_replicate_pad")) continue;
      pads += c.count;
      CHECK(c.cls == (runtime == Runtime::compiled ? KernelClass::activation : KernelClass::indexed_copy));
    }
    CHECK(convs > 20);
    CHECK(pads == convs);
  }
}

TEST_CASE("HunyuanVideo's own code builds its decoder's attention mask a row at a time", "[profiles][vae]") {
  // 1280x720, 129 frames: 33 latent frames of 90 x 160, in the official code's tiles: 32 latent pixels every 24
  // (rows 32, 32, 32 and 18; columns six of 32 and one of 16) and 17 latent frames every 12 (17, 17 and 9).
  const Architecture& vae = arch("hunyuan-video-vae-decoder");
  StepShape shape{.width = 1280, .height = 720, .frames = 129};
  shape.tiles = {.size = 32, .overlap = 8, .frames = 17, .frame_overlap = 5};
  REQUIRE_FALSE(tiles_problem(vae, shape.tiles).has_value());
  const auto named = [&](Runtime runtime, const std::string& name) {
    shape.runtime = runtime;
    std::vector<KernelCall> out;
    for (const KernelCall& c : step_kernels(vae, shape, Dtype::fp16)) {
      if (c.name == name) out.push_back(c);
    }
    return out;
  };
  const double tiles = 4 * 7 * 3, rows = (32 * 3 + 18) * (32 * 6 + 16) * (17 + 17 + 9);  // 1,019,616 rows: every tile's voxels
  CHECK(count_kernels(named(Runtime::hunyuanvideo, "mid.attn.mask.row")) == rows);
  CHECK(count_kernels(named(Runtime::hunyuanvideo, "mid.attn.mask")) == tiles);  // torch.full, a tile each
  CHECK(count_kernels(named(Runtime::diffusers, "mid.attn.mask.row")) == 0);
  CHECK(count_kernels(named(Runtime::diffusers, "mid.attn.mask")) == 5 * tiles);  // arange, repeat_interleave, compare, where, cast
  CHECK(count_kernels(named(Runtime::comfyui, "mid.attn.mask")) == 0);            // ComfyUI passes no mask
  // Row i of frame f opens (f + 1) h w keys: a tile of t frames of h x w fills (h w)^2 t (t + 1) / 2 fp16 elements,
  // summed over the tiles (sum of h^2)(sum of w^2)(sum of t (t + 1) / 2).
  const double filled = (3 * 32 * 32 + 18 * 18) * (6 * 32 * 32 + 16 * 16) * (17 * 18 / 2 + 17 * 18 / 2 + 9 * 10 / 2.0);
  CHECK(kernels_bytes(named(Runtime::hunyuanvideo, "mid.attn.mask.row"), Dtype::fp16) == Approx(2 * filled).epsilon(1e-12));
  // Each row is a launch the host makes for a few kilobytes: the decode takes no less than the host's launches,
  // and nearly the rows' host time longer than diffusers' (its GroupNorm under autocast, in fp32, adds; the GPU
  // works off the tile before's upper levels while the host loops over the next tile's rows, which takes some
  // 2 s of the 30 back).
  const KernelModel h100(*Catalog::builtin().gpu("h100-sxm"));
  const double dispatch = builtin_kernel_constants()->eager_dispatch_us * 1e-6, host = rows * dispatch;
  shape.runtime = Runtime::diffusers;
  const double diffusers = estimate_step(vae, shape, h100, Dtype::fp16).time_s;
  shape.runtime = Runtime::hunyuanvideo;
  const StepEstimate own = estimate_step(vae, shape, h100, Dtype::fp16);
  CHECK(own.time_s >= count_kernels(own.calls) * dispatch);
  CHECK(own.time_s - diffusers > 0.9 * host);
  // The runtime is HunyuanVideo's decoder's code and no other model's.
  CHECK_FALSE(runtime_problem(vae, Runtime::hunyuanvideo).has_value());
  const auto problem = runtime_problem(arch("flux-dit"), Runtime::hunyuanvideo);
  REQUIRE(problem.has_value());
  CHECK(problem->field == "runtime");
  CHECK_THAT(problem->message, Catch::Contains("conv3d-vae-decoder") && Catch::Contains("flux-dit"));
  CHECK_FALSE(runtime_problem(arch("flux-dit"), Runtime::diffusers).has_value());
}

TEST_CASE("a workflow task that names a model step runs its kernels, steps times", "[profiles][simulation]") {
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "work": {"architecture": "sdxl-unet", "steps": 30, "batch": 2,
                                                                  "width": 1024, "height": 1024, "dtype": "fp16"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  CHECK(task.shape.runtime == Runtime::comfyui);  // a UNet runs as ComfyUI runs it unless told
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  const StepEstimate step = estimate_step(arch("sdxl-unet"), task.shape, KernelModel(*Catalog::builtin().gpu("h100-sxm")), Dtype::fp16);
  CHECK(r.end_s - r.compute_start_s == Approx(30 * step.time_s));
  CHECK(task.flop == Approx(30 * kernels_flop(step.calls)));
  // The trace says why: the kernels by bound, and the fixed part (fixed costs and the host's wait).
  CHECK(r.compute_bound_s == Approx(30 * step.compute_bound_s));
  CHECK(r.memory_bound_s == Approx(30 * step.memory_bound_s));
  CHECK(r.fixed_s == Approx(30 * (step.fixed_s + step.host_wait_s)));
  CHECK(r.compute_bound_s + r.memory_bound_s + r.fixed_s == Approx(r.end_s - r.compute_start_s));
  CHECK(r.memory_bound_s > 0.1 * r.compute_bound_s);  // an eager UNet: GroupNorms, copies, elementwise
}

TEST_CASE("a model step's attention runs on the backend the task names, and a GPU without its constants says so", "[profiles][simulation]") {
  const auto run_on = [](const std::string& node, const std::string& attention) {
    const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": ")" + node + R"(", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "denoise", "work": {"architecture": "flux-dit", "steps": 4, "width": 1024, "height": 1024)" +
                                        attention + R"(}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
    const TaskRecord r = simulate(sc).trace.tasks[0];
    return std::pair{r.end_s - r.compute_start_s, borrowed_kernel_constants(sc.cluster, sc.workflows)};
  };
  const auto [flash2, flash2_guesses] = run_on("hgx-h100-8", "");
  const auto [cudnn, cudnn_guesses] = run_on("hgx-h100-8", R"(, "attention": "cudnn")");
  // FLUX's attention is a fifth of the step's FLOP; on cuDNN's kernels it runs ~1.8 times as fast on Hopper.
  CHECK(cudnn < 0.95 * flash2);
  CHECK(cudnn > 0.6 * flash2);
  CHECK(flash2_guesses.empty());
  CHECK(cudnn_guesses.empty());
  // On an A100, where no cuDNN attention was measured, FlashAttention-2's constants time it, and the run says so.
  const auto [a100_flash2, a100_flash2_guesses] = run_on("hgx-a100-8", "");
  const auto [a100_cudnn, a100_guesses] = run_on("hgx-a100-8", R"(, "attention": "cudnn")");
  CHECK(a100_cudnn == a100_flash2);
  CHECK(a100_flash2_guesses.empty());
  REQUIRE(a100_guesses.size() == 1);
  CHECK_THAT(a100_guesses[0], Catch::Contains("(ampere): cuDNN attention was not measured on ampere GPUs"));
}

TEST_CASE("DeepSeek-V3's latent attention: a prompt up-projects the latents, a decode step attends over them absorbed", "[profiles][mla]") {
  const Architecture& ds = arch("deepseek-v3");
  const std::optional<LatentAttention> l = LatentAttention::of(ds);
  REQUIRE(l);
  CHECK(l->cached() == 576);  // kv_lora_rank 512 + qk_rope_head_dim 64: what a token caches a layer
  CHECK(l->qk() == 192);
  // A 2,048-token forward with every token's logits: 2 FLOP a token for each of the 36.6 B parameters the
  // model card says a token activates (the output head's 0.9 B among them; the input embedding is a
  // lookup), plus causal attention at keys of 192 and values of 128: 61 layers x 128 heads x 2 x 2048 x 1024 x 320.
  const double T = 2048;
  const double attention = 61 * 128 * 2 * T * (T / 2) * (192 + 128);
  CHECK(kernels_flop(step_kernels(ds, {.tokens = T, .training = true}, Dtype::bf16)) == Approx(2 * T * 36.6e9 + attention).epsilon(0.01));
  // A decode step of 64 sequences over 4,096 cached tokens: queries absorbed into the latent (a batched
  // GEMM of the heads), one attention whose 128 heads share each sequence's latent, read once.
  const std::vector<KernelCall> decode = step_kernels(ds, {.batch = 64, .tokens = 1, .context = 4096}, Dtype::bf16);
  const auto named = [&](const char* name) { return std::count_if(decode.begin(), decode.end(), [&](const KernelCall& c) { return c.name == name; }); };
  CHECK(named("attn.q_absorb") == 61);
  CHECK(named("attn.v_absorb") == 61);
  CHECK(named("attn.kv_b") == 0);
  const auto attn = std::find_if(decode.begin(), decode.end(), [](const KernelCall& c) { return c.name == "attn"; });
  REQUIRE(attn != decode.end());
  CHECK(attn->latent_kv);
  CHECK(attn->groups == 128);
  CHECK(kernel_bytes(*attn, Dtype::bf16) == Approx(2 * (64 * 128 * (576 + 512) + 64 * 4097 * 576.0)));
  // Dense MLPs in the first three layers, mixtures in the 58 after them.
  const std::vector<KernelCall> prompt = step_kernels(ds, {.tokens = T}, Dtype::bf16);
  CHECK(std::count_if(prompt.begin(), prompt.end(), [](const KernelCall& c) { return c.name == "mlp.down" && c.k == 18432; }) == 3);
  CHECK(std::count_if(prompt.begin(), prompt.end(), [](const KernelCall& c) { return c.name == "moe.router"; }) == 58);
  CHECK(std::count_if(prompt.begin(), prompt.end(), [](const KernelCall& c) { return c.name == "attn.kv_b"; }) == 61);
}

TEST_CASE("model steps and architectures are read strictly", "[profiles][input]") {
  auto with_work = [](const std::string& work) {
    return test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "t", "work": )" + work + R"(}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  CHECK(with_work(R"({"architecture": "flux-dit", "width": 1024, "height": 1024, "runtime": "compiled"})").empty());
  CHECK_THAT(with_work(R"({"architecture": "flux-2"})"), Catch::Contains("/workflows/w/tasks/0/work/architecture") &&
                                                            Catch::Contains("unknown architecture \"flux-2\"") && Catch::Contains("sdxl-unet"));
  CHECK_THAT(with_work(R"({"architecture": "flux-dit", "width": 1024})"), Catch::Contains("work/height") && Catch::Contains("width and height"));
  CHECK_THAT(with_work(R"({"architecture": "llama-3-8b"})"), Catch::Contains("work/tokens"));
  CHECK_THAT(with_work(R"({"architecture": "flux-dit", "width": 1024, "height": 1024, "runtime": "jit"})"),
             Catch::Contains("work/runtime") && Catch::Contains(runtime_choices()));
  CHECK(with_work(R"({"architecture": "flux-dit", "width": 1024, "height": 1024, "attention": "cudnn"})").empty());
  CHECK_THAT(with_work(R"({"architecture": "flux-dit", "width": 1024, "height": 1024, "attention": "fa3"})"),
             Catch::Contains("work/attention") && Catch::Contains("expected flash2") && Catch::Contains("found \"fa3\""));
  CHECK_THAT(with_work(R"({"architecture": "flux-dit", "operator": "sdxl-text-encode", "width": 1, "height": 1})"),
             Catch::Contains("give one of"));

  auto catalog_error = [](const std::string& entry) {
    Catalog c;
    try {
      c.add_json(R"({"architectures": {"mine": )" + entry + "}}", "mine.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string transformer = R"("name": "m", "source": "made up", "family": "transformer", "hidden": 64, "heads": 4, "ffn": 256)";
  CHECK(catalog_error("{" + transformer + R"(, "layers": 2})").empty());
  CHECK_THAT(catalog_error("{" + transformer + R"(, "layers": 1e6})"), Catch::Contains("/architectures/mine/layers"));
  CHECK_THAT(catalog_error("{" + transformer + "}"), Catch::Contains("layers"));
  CHECK_THAT(catalog_error(R"({"name": "m", "source": "s", "family": "gan"})"), Catch::Contains("family") && Catch::Contains("unet"));
  CHECK_THAT(catalog_error(R"({"name": "u", "source": "s", "family": "unet", "channels": [320, 640], "depth": [1], "mid_depth": 1,
                               "head_dim": 64, "context_dim": 768, "context_tokens": 77, "layers_per_block": 2, "latent_channels": 4, "vae_factor": 8})"),
             Catch::Contains("one transformer depth per level"));
  // Latent attention and dense first layers come with the numbers they need, and without those they replace.
  const std::string latent = transformer + R"(, "layers": 4, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16)";
  CHECK(catalog_error("{" + latent + "}").empty());
  CHECK(catalog_error("{" + latent + R"(, "experts": 8, "experts_per_token": 2, "dense_layers": 1, "dense_ffn": 512})").empty());
  CHECK_THAT(catalog_error("{" + transformer + R"(, "layers": 4, "kv_lora_rank": 32, "qk_nope_head_dim": 16})"),
             Catch::Contains("/architectures/mine/qk_rope_head_dim") && Catch::Contains("beside \"kv_lora_rank\""));
  CHECK_THAT(catalog_error("{" + transformer + R"(, "layers": 4, "v_head_dim": 16})"), Catch::Contains("/architectures/mine/v_head_dim"));
  CHECK_THAT(catalog_error("{" + latent + R"(, "head_dim": 16})"), Catch::Contains("/architectures/mine/head_dim") && Catch::Contains("share one latent"));
  CHECK_THAT(catalog_error("{" + latent + R"(, "experts": 8, "experts_per_token": 2, "dense_layers": 5, "dense_ffn": 512})"),
             Catch::Contains("/architectures/mine/dense_layers") && Catch::Contains("at most \"layers\" (4)"));
  CHECK_THAT(catalog_error("{" + latent + R"(, "experts": 8, "experts_per_token": 2, "dense_layers": 1})"), Catch::Contains("/architectures/mine/dense_ffn"));
  CHECK_THAT(catalog_error("{" + latent + R"(, "dense_layers": 1, "dense_ffn": 512})"), Catch::Contains("mixture of experts"));
  CHECK_THAT(catalog_error("{" + latent + R"(, "experts": 8, "experts_per_token": 2, "dense_layers": 1.5, "dense_ffn": 512})"), Catch::Contains("whole number"));
  CHECK_THAT(catalog_error("{" + transformer + R"(, "layers": 4, "kv_lora_rank": 0, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16})"),
             Catch::Contains("/architectures/mine/kv_lora_rank") && Catch::Contains("positive"));
  // Wan 2.2's decoder fields: residual upsamplings on or off, a whole patch of at least a pixel.
  const std::string causal = R"("name": "v", "source": "s", "family": "causal-vae-decoder", "channels": [64, 64, 32], "latent_channels": 4,
                                "layers_per_block": 1, "vae_factor": 8, "temporal_factor": 4, "temporal_upsamplings": 1)";
  CHECK(catalog_error("{" + causal + R"(, "patch": 2, "up_residual": 1})").empty());
  CHECK_THAT(catalog_error("{" + causal + R"(, "patch": 0})"), Catch::Contains("/architectures/mine/patch") && Catch::Contains("at least 1"));
  CHECK_THAT(catalog_error("{" + causal + R"(, "up_residual": 2})"), Catch::Contains("/architectures/mine/up_residual") && Catch::Contains("0 or 1"));
  // LTX-Video's decoder: the compression it states must be what its levels make.
  const std::string ltx = R"("name": "l", "source": "s", "family": "ltx-vae-decoder", "channels": [64, 32, 16], "latent_channels": 8,
                             "layers_per_block": 1, "patch": 2)";
  CHECK(catalog_error("{" + ltx + R"(, "vae_factor": 8, "temporal_factor": 4})").empty());
  CHECK_THAT(catalog_error("{" + ltx + R"(, "vae_factor": 32, "temporal_factor": 4})"), Catch::Contains("/architectures/mine/vae_factor") && Catch::Contains("expected 8"));
  CHECK_THAT(catalog_error("{" + ltx + R"(, "vae_factor": 8, "temporal_factor": 8})"), Catch::Contains("/architectures/mine/temporal_factor") && Catch::Contains("expected 4"));
  CHECK_THAT(catalog_error("{" + ltx + R"(, "vae_factor": 8, "temporal_factor": 4, "timestep_conditioning": 3})"), Catch::Contains("0 or 1"));
}

TEST_CASE("eager GroupNorm + SiLU against published Hopper timings (the reduction class's source)", "[profiles][validation]") {
  // PyTorch's GroupNorm as ComfyUI runs it (models/runtimes.json): statistics with one CTA per (sample,
  // group), the affine factors, the normalization, then a separate SiLU. Measured by sglang (pull requests
  // 26045 and 23938), bf16, 32 groups, one sample.
  struct Case {
    const char* gpu;
    double channels, pixels, measured_s;
  };
  for (const Case& c : {Case{"h100-sxm", 512, 8 * 45 * 80, 452e-6}, Case{"h100-sxm", 512, 16 * 90 * 160, 3468e-6},
                        Case{"h100-sxm", 512, 16 * 180 * 320, 13711e-6}, Case{"h200-sxm", 128, 20 * 256 * 256, 4717e-6}}) {
    const KernelModel model(*Catalog::builtin().gpu(c.gpu));
    const auto calls = operation_kernels(runtime_profile(Runtime::comfyui), "group_norm_silu", c.pixels, c.channels, Dtype::bf16, 32);
    REQUIRE(calls.size() == 4);
    INFO(c.gpu << " " << c.channels << " x " << c.pixels);
    CHECK(model.time_s(calls, Dtype::bf16) == Approx(c.measured_s).epsilon(0.10));
  }
}

namespace {

double kernels_named(const std::vector<KernelCall>& calls, std::string_view prefix, std::optional<KernelClass> cls = std::nullopt) {
  double n = 0;
  for (const KernelCall& c : calls) n += c.name.starts_with(prefix) && (!cls || c.cls == *cls) ? c.count : 0;
  return n;
}

}  // namespace

TEST_CASE("each runtime launches the kernels its code does (models/runtimes.json)", "[profiles]") {
  // FLUX.1 in ComfyUI (comfy/ldm/flux/layers.py with PyTorch 2.4-2.8), counted by reading the code: a
  // double-stream block launches 81 kernels (two modulations of 2; per stream a LayerNorm, 1 + scale,
  // addcmul, the QKV GEMM and two 8-kernel RMSNorms; three concatenations, two 5-kernel rotary
  // embeddings, attention and its output copy; per stream the projection, gate and residual, LayerNorm,
  // modulation, the MLP's two GEMMs and GELU, gate and residual), a single-stream block 38.
  const auto comfy = step_kernels(arch("flux-dit"), {.width = 1024, .height = 1024}, Dtype::bf16);
  CHECK(kernels_named(comfy, "double.") == 19 * 81);
  CHECK(kernels_named(comfy, "single.") == 38 * 38 + 1);  // and one concatenation of text and image before them
  // Compiled, the elementwise work fuses: a double block is its 10 GEMMs, attention, 4 norms, 2 fused
  // rotary embeddings, 4 gated residual adds, 2 GELUs, 4 fused RMSNorms and the 2 modulation SiLUs.
  const auto compiled = step_kernels(arch("flux-dit"), {.width = 1024, .height = 1024, .runtime = Runtime::compiled}, Dtype::bf16);
  CHECK(kernels_named(compiled, "double.") == 19 * 29);
  // The same FLOP whichever runtime runs it.
  const auto diffusers = step_kernels(arch("flux-dit"), {.width = 1024, .height = 1024, .runtime = Runtime::diffusers}, Dtype::bf16);
  CHECK(kernels_flop(diffusers) == Approx(kernels_flop(comfy)));
  // diffusers holds the attention's projections apart (FluxAttention's to_q, to_k, to_v a stream;
  // proj_mlp beside them in a single block): a double block's 10 GEMMs become 14, a single block's 3 become 6.
  CHECK(kernels_named(comfy, "double.", KernelClass::gemm) == 19 * 10);
  CHECK(kernels_named(diffusers, "double.", KernelClass::gemm) == 19 * 14);
  CHECK(kernels_named(comfy, "single.", KernelClass::gemm) == 38 * 3);
  CHECK(kernels_named(diffusers, "single.", KernelClass::gemm) == 38 * 6);
  CHECK(kernels_named(compiled, "single.", KernelClass::gemm) == 38 * 3);
  CHECK(kernels_flop(compiled) == Approx(kernels_flop(comfy)));
  // Bytes as the code moves them: ComfyUI's rotary embedding of one bf16 tensor upcasts it (2 bytes in, 4
  // out), multiplies two strided halves by fp32 matrices (2 + 4 bytes each), adds (4 + 4 + 4) and casts
  // back (4 + 2): 36 bytes per element, where a fused kernel reads and writes 4.
  double rope = 0, fused = 0;
  for (const KernelCall& c : comfy) rope += c.origin != nullptr && c.origin->operation == "rope" ? c.count * kernel_bytes(c, Dtype::bf16) : 0;
  for (const KernelCall& c : compiled) fused += c.origin != nullptr && c.origin->operation == "rope" ? c.count * kernel_bytes(c, Dtype::bf16) : 0;
  CHECK(rope == Approx(9 * fused));
}

TEST_CASE("broadcast elementwise kernels and padded attention heads are timed as their own", "[profiles]") {
  const GpuType& h100 = *Catalog::builtin().gpu("h100-sxm");
  const KernelModel model(h100);
  // 1 GiB in and out of a broadcast multiply (far above L2): its bytes at the class's share of HBM, plus
  // its fixed cost.
  const double rows = 65536, width = 4096;
  const KernelEstimate b = model.estimate({.cls = KernelClass::broadcast, .m = rows, .n = width}, Dtype::bf16);
  const MemoryKernelConstants& mc = builtin_kernel_constants()->of(GpuArch::hopper).memory[static_cast<std::size_t>(KernelClass::broadcast) - static_cast<std::size_t>(KernelClass::norm)];
  const double bytes = 2 * 2 * rows * width, in_l2 = h100.l2_bytes / bytes;
  CHECK(b.time_s() == Approx(mc.fixed_us * 1e-6 + bytes / (h100.memory_bandwidth_Bps * h100.kernel_memory_scale * mc.efficiency) *
                                                      (1 - in_l2 + in_l2 / mc.l2_speedup)));
  // An fp32 upcast moves 6 bytes an element where the class's default for bf16 is 4.
  const KernelEstimate cast = model.estimate({.cls = KernelClass::broadcast, .m = rows, .n = width, .element_bytes = 6}, Dtype::bf16);
  CHECK(cast.memory_s > 1.4 * b.memory_s);
  // FlashAttention-2 pads a head dimension of 40 to its 64-wide kernel: the same compute time.
  const KernelCall d40{.cls = KernelClass::attention, .m = 4096, .n = 4096, .k = 40, .batch = 16};
  KernelCall d64 = d40;
  d64.k = 64;
  CHECK(model.estimate(d40, Dtype::bf16).compute_s == Approx(model.estimate(d64, Dtype::bf16).compute_s));
}

TEST_CASE("runtime op lists are read strictly", "[profiles][input]") {
  const auto& builtin = runtime_profile(Runtime::comfyui);
  CHECK(builtin.eager);
  CHECK_FALSE(runtime_profile(Runtime::compiled).eager);
  auto error = [](const std::string& text) {
    try {
      parse_runtimes(text, "runtimes.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error("{"), Catch::Contains("runtimes.json"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {}})"), Catch::Contains("/runtimes/comfyui") && Catch::Contains("diffusers"));
  const std::string one = R"({"name": "n", "source": "s", "launch": "eager", "ops": {"rms_norm": {"source": "s", "kernels": [KERNEL]}}})";
  auto with_kernel = [&](const std::string& kernel) {
    std::string r = one;
    r.replace(r.find("KERNEL"), 6, kernel);
    return error(R"({"about": "a", "runtimes": {"comfyui": )" + r + "}}");
  };
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "broadcast", "reads": ["act"], "writes": ["fp32"]})"),
             Catch::Contains("/runtimes/comfyui/ops/layer_norm") && Catch::Contains("required"));  // the others are missing
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "gemm", "reads": ["act"], "writes": []})"),
             Catch::Contains("/runtimes/comfyui/ops/rms_norm/kernels/0/class") && Catch::Contains("memory-bound"));
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "norm", "reads": ["fp33"], "writes": []})"),
             Catch::Contains("/runtimes/comfyui/ops/rms_norm/kernels/0/reads") && Catch::Contains("\"fp32*0.5\""));
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "norm", "reads": [], "writes": []})"), Catch::Contains("a tensor read or written"));
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "norm", "reads": ["act*inf"], "writes": []})"), Catch::Contains("kernels/0/reads"));
  CHECK_THAT(with_kernel(R"({"op": "x", "class": "norm", "grid": "groups", "reads": ["act"], "writes": []})"),
             Catch::Contains("kernels/0/grid") && Catch::Contains("reduction"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "ops": {"rms_nrom": {}}}}})"),
             Catch::Contains("rms_nrom") && Catch::Contains("did you mean \"rms_norm\""));
  // The training runtime's section, as strict.
  const std::string projections = R"("launch": "eager", "projections": {"layout": "separate", "source": "s"})";
  CHECK_THAT(error(R"({"about": "a", "training_about": "t", "runtimes": {}, "training": {"torchtitan": {"name": "n", "source": "s", )" + projections +
                   R"(, "ops": {"layer_norm": {}}}}})"),
             Catch::Contains("/training/torchtitan/ops/layer_norm") && Catch::Contains("no model or layer calls") && Catch::Contains("/training/torchtitan/ops/rope"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {}})"), Catch::Contains("/training_about") && Catch::Contains("/training"));
  // A runtime "like" another: only the operations it changes, the rest that one's; the families it runs, checked.
  const std::string ops = R"("ops": {"group_norm": {"source": "s", "kernels": []}})";
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "like": "diffusers", )" + ops + "}}}"),
             Catch::Contains("/runtimes/comfyui/like") && Catch::Contains("a runtime listed before this one"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "families": ["vae"], )" + ops + "}}}"),
             Catch::Contains("/runtimes/comfyui/families") && Catch::Contains("conv3d-vae-decoder"));
  const RuntimeProfile& own = runtime_profile(Runtime::hunyuanvideo);
  CHECK(own.families == std::vector<std::string>{"conv3d-vae-decoder"});
  CHECK(own.ops.size() == runtime_profile(Runtime::diffusers).ops.size());
  CHECK(own.ops.at("replicate_pad").front().source == runtime_profile(Runtime::diffusers).ops.at("replicate_pad").front().source);
  CHECK(own.ops.at("group_norm").size() == 5);  // autocast's fp32 casts around it
  CHECK(torchtitan_profile().separate_projections);
  CHECK(torchtitan_profile().ops.size() == 13);
  // How a diffusion transformer's projections are held, with the code it was read from.
  CHECK(runtime_profile(Runtime::diffusers).separate_projections);
  CHECK_FALSE(runtime_profile(Runtime::comfyui).separate_projections);
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "ops": {}}}})"),
             Catch::Contains("/runtimes/comfyui/projections") && Catch::Contains("required"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "projections": {"layout": "split", "source": "s"}, "ops": {}}}})"),
             Catch::Contains("/runtimes/comfyui/projections/layout") && Catch::Contains("fused"));
  CHECK_THAT(error(R"({"about": "a", "runtimes": {"comfyui": {"name": "n", "source": "s", "launch": "eager", "projections": {"layout": "fused"}, "ops": {}}}})"),
             Catch::Contains("/runtimes/comfyui/projections/source"));
}

TEST_CASE("a sequence-parallel sampler step runs each GPU's shard and the gang's all-to-alls", "[profiles][simulation]") {
  // FLUX.1 at 256x256 (256 image and 512 text tokens), one step, on four unit GPUs (NVLink of 100 GB/s
  // and 1 us a hop through the node's switch) as Ulysses runs it.
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": 4,
          "work": {"architecture": "flux-dit", "steps": 1, "width": 256, "height": 256, "parallel": {"sequence": 4}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  REQUIRE(task.collectives.size() == 1);
  // Four all-to-alls (queries, keys, values, output) per attention layer, 19 + 38 layers; each rank's
  // buffer a quarter of the 768 tokens times 3072 hidden, bf16.
  const double calls = 4 * 57, per_call = 768 / 4 * 3072 * 2.0;
  CHECK(task.collectives[0].op == CollectiveOp::all_to_all);
  CHECK(task.collectives[0].calls == calls);
  CHECK(task.collectives[0].bytes == Approx(calls * per_call));
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  // Each GPU runs its shard of every step: a quarter of the tokens, a quarter of the heads in attention.
  const GpuType& unit = run.cluster.gpu_type(make_id<GpuId>(0));
  const StepEstimate shard = estimate_step(arch("flux-dit"), task.shape, KernelModel(unit), Dtype::bf16);
  CHECK(r.comm_start_s - r.compute_start_s == Approx(shard.time_s));
  // Hand-worked all-to-all: each GPU sends three quarters of its buffer, a quarter to each peer, through
  // its 100 GB/s link into the switch, three flows sharing it; each call pays the two hops' latency.
  const double one_call = 0.75 * per_call / 100e9 + 2e-6;
  CHECK(r.end_s - r.comm_start_s == Approx(calls * one_call).epsilon(0.01));
  // Attention's FLOP splits over the gang; one GPU's step does a quarter of the whole.
  StepShape whole = task.shape;
  whole.sequence_parallel = 1;
  CHECK(kernels_flop(step_kernels(arch("flux-dit"), task.shape, Dtype::bf16)) ==
        Approx(kernels_flop(step_kernels(arch("flux-dit"), whole, Dtype::bf16)) / 4).epsilon(0.01));
}

TEST_CASE("ring attention passes keys and values round the gang, hidden behind the attention blocks", "[profiles][simulation]") {
  // The same FLUX.1 step (768 tokens) on four unit GPUs, its attention as ring attention: each GPU's 192
  // queries over one block of 192 keys a pass, four passes, the keys and values going round.
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": 4,
          "work": {"architecture": "flux-dit", "steps": 1, "width": 256, "height": 256, "parallel": {"sequence": 4, "ring": 4}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  REQUIRE(task.collectives.size() == 1);
  CHECK(task.shape.ring_degree == 4);
  CHECK(task.shape.ulysses_degree() == 1);
  // Three passes a self-attention layer, 19 + 38 layers; each GPU sends its 192 tokens' keys and values
  // (2 x 3,072 wide, bf16) to the next, in rings of the gang's four.
  const double calls = 3 * 57, per_call = 2 * 192 * 3072 * 2.0;
  CHECK(task.collectives[0].op == CollectiveOp::send_recv);
  CHECK(task.collectives[0].calls == calls);
  CHECK(task.collectives[0].bytes == Approx(calls * per_call));
  CHECK(task.collectives[0].group_size == 4);
  // The sends may run beside three of the four blocks of each self-attention: 3/4 of its share of the FLOP.
  const auto kernels = step_kernels(arch("flux-dit"), task.shape, Dtype::bf16);
  double attention_flop = 0, attention_launches = 0;
  for (const KernelCall& c : kernels) {
    if (c.cls != KernelClass::attention) continue;
    attention_flop += kernels_flop({c});
    attention_launches += c.count;
  }
  CHECK(task.collectives[0].overlap == Approx(0.75 * attention_flop / kernels_flop(kernels)).epsilon(1e-12));
  CHECK(attention_launches == 4 * 57);  // a block a pass
  // The same FLOP as Ulysses' shard: a quarter of the queries over every key, all heads.
  StepShape ulysses = task.shape;
  ulysses.ring_degree = 1;
  CHECK(kernels_flop(kernels) == Approx(kernels_flop(step_kernels(arch("flux-dit"), ulysses, Dtype::bf16))).epsilon(1e-12));
  // Hand-worked: the sends start when the attention's share of the shard is left, each GPU's flow alone on
  // its 100 GB/s link into the switch and on the next GPU's out of it, each call paying the two hops.
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  const GpuType& unit = run.cluster.gpu_type(make_id<GpuId>(0));
  const double shard = estimate_step(arch("flux-dit"), task.shape, KernelModel(unit), Dtype::bf16).time_s;
  const double sends = calls * (per_call / 100e9 + 2e-6), start = (1 - task.collectives[0].overlap) * shard;
  CHECK(r.comm_start_s - r.compute_start_s == Approx(start));
  CHECK(r.end_s - r.compute_start_s == Approx(std::max(shard, start + sends)).epsilon(0.01));
}

TEST_CASE("a USP step runs Ulysses' all-to-alls in groups and ring passes in rings across them", "[profiles][simulation][collectives]") {
  // The same FLUX.1 step (768 tokens) on four unit GPUs as xDiT's USP runs it with ring degree 2: Ulysses
  // over GPUs {0, 1} and {2, 3}, rings over {0, 2} and {1, 3} (yunchang's groups, Ulysses low).
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": 4,
          "work": {"architecture": "flux-dit", "steps": 1, "width": 256, "height": 256, "parallel": {"sequence": 4, "ring": 2}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  CHECK(task.shape.ulysses_degree() == 2);
  REQUIRE(task.collectives.size() == 2);
  // Each rank's share is a quarter of the tokens: the all-to-alls' buffers as under Ulysses alone, in pairs.
  const double shard = 768 / 4 * 3072 * 2.0;
  const CollectiveSpec& ulysses = task.collectives[0];
  CHECK(ulysses.op == CollectiveOp::all_to_all);
  CHECK(ulysses.calls == 4 * 57);
  CHECK(ulysses.bytes == Approx(4 * 57 * shard));
  CHECK(ulysses.group_size == 2);
  CHECK(ulysses.group_stride == 1);
  // One pass a self-attention (a ring of two), keys and values of half the tokens and half the heads.
  const CollectiveSpec& ring = task.collectives[1];
  CHECK(ring.op == CollectiveOp::send_recv);
  CHECK(ring.calls == 57);
  CHECK(ring.bytes == Approx(57 * 2 * shard));
  CHECK(ring.group_size == 2);
  CHECK(ring.group_stride == 2);
  // Attention: half the queries, half the heads, over half the keys a pass, two passes; the FLOP of Ulysses alone.
  const auto kernels = step_kernels(arch("flux-dit"), task.shape, Dtype::bf16);
  const auto joint = std::find_if(kernels.begin(), kernels.end(), [](const KernelCall& c) { return c.cls == KernelClass::attention; });
  REQUIRE(joint != kernels.end());
  CHECK(joint->m == 384);
  CHECK(joint->n == 384);
  CHECK(joint->batch == 12);
  CHECK(joint->count == 2);
  StepShape alone = task.shape;
  alone.ring_degree = 1;
  CHECK(kernels_flop(kernels) == Approx(kernels_flop(step_kernels(arch("flux-dit"), alone, Dtype::bf16))).epsilon(1e-12));
  // Hand-worked: the ring's sends, each GPU to its ring partner alone on its link, run beside the last
  // half of the attention's share and end before the compute does; then the pairs' all-to-alls, each GPU
  // sending half its buffer to its partner, the two pairs on links of their own.
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  const GpuType& unit = run.cluster.gpu_type(make_id<GpuId>(0));
  const double compute = estimate_step(arch("flux-dit"), task.shape, KernelModel(unit), Dtype::bf16).time_s;
  const double ring_start = (1 - ring.overlap) * compute, sends = 57 * (2 * shard / 100e9 + 2e-6);
  REQUIRE(ring_start + sends < compute);
  CHECK(r.comm_start_s - r.compute_start_s == Approx(ring_start));
  CHECK(r.end_s - r.compute_start_s == Approx(compute + 4 * 57 * (0.5 * shard / 100e9 + 2e-6)).epsilon(0.01));
}

TEST_CASE("a PipeFusion run's time is its warm-up steps, its bands' steps and the pipeline's fill", "[profiles]") {
  // FLUX.1's 19 double and 38 single blocks in four stages: xDiT gives the first ceil(57 / 4) = 15, all double.
  StepShape s;
  s.pipeline_stages = 4;
  s.patches = 2;
  s.pipeline_warmup = 2;
  const PipelineStage first = first_pipeline_stage(arch("flux-dit"), s);
  CHECK(first.doubles == 15);
  CHECK(first.singles == 0);
  CHECK(first.share() == Approx(15.0 / 57));
  s.pipeline_stages = 2;  // 29 blocks: the 19 double ones and 10 single
  CHECK(first_pipeline_stage(arch("flux-dit"), s).singles == 10);
  s.pipeline_stages = 4;
  // Ten steps, a band's step 1 s of the first stage's kernels, its whole-image step 3 s. The two warm-up steps
  // pass the image through the stages one at a time: 2 x 3 x 57 / 15 = 22.8 s. Two bands keep only two of the
  // four stages busy: each of the eight other steps takes four bands' times, 4 x 0.5 s (the first band is back at
  // stage 0 after four), and the last step's second band leaves one band's time after its first.
  CHECK(pipefusion_run_s(arch("flux-dit"), s, 10, 1.0, 3.0) == Approx(22.8 + 8 * 2 + 0.5));
  s.patches = 1;  // one band: each step passes the four stages in turn
  CHECK(pipefusion_run_s(arch("flux-dit"), s, 10, 1.0, 3.0) == Approx(22.8 + 8 * 4));
  s.patches = 2;
  s.patches = 8;  // more bands than stages: every stage busy, eight bands' times a step
  CHECK(pipefusion_run_s(arch("flux-dit"), s, 10, 1.0, 3.0) == Approx(22.8 + 8 * 1 + 3 * 0.125));
  CHECK(pipefusion_run_s(arch("flux-dit"), s, 1, 1.0, 3.0) == Approx(11.4));  // warm-up only
  s.pipeline_warmup = 0;
  CHECK(pipefusion_run_s(arch("flux-dit"), s, 10, 1.0, 3.0) == Approx(10 + 3 * 0.125));
}

TEST_CASE("a PipeFusion sampler step runs the first stage's blocks band by band and hands each on", "[profiles][simulation]") {
  // FLUX.1 at 256x256 (256 image tokens in 16 latent rows, 512 text tokens), three steps, on four unit GPUs
  // (NVLink of 100 GB/s, 1 us a hop through the switch): four stages, four bands, one warm-up step.
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-4", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": 4, "model": {"id": "flux", "weights": "24 GB"}, "working_set": "1 GB",
          "work": {"architecture": "flux-dit", "steps": 3, "width": 256, "height": 256, "parallel": {"pipefusion": 4, "patches": 4}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  CHECK(task.shape.pipeline_stages == 4);
  CHECK(task.shape.patches == 4);
  CHECK(task.shape.pipeline_warmup == 1);  // xDiT's default
  // The first stage's 15 double blocks, each band's 64 image tokens with the 512 text ones over every token's keys.
  const auto kernels = step_kernels(arch("flux-dit"), task.shape, Dtype::bf16);
  double attentions = 0;
  for (const KernelCall& c : kernels) {
    if (c.cls != KernelClass::attention) continue;
    CHECK(c.m == 64 + 512);
    CHECK(c.n == 768);
    attentions += c.count;
  }
  CHECK(attentions == 4 * 15);
  CHECK(std::none_of(kernels.begin(), kernels.end(), [](const KernelCall& c) { return c.name.starts_with("final.") || c.name.starts_with("single."); }));
  // Each GPU holds its stage's weights and every image token's keys and values for its 15 layers.
  CHECK(task.weights_per_gpu_bytes() == Approx(24e9 * 15 / 57));
  CHECK(task.working_set_bytes == Approx(1e9 + 2 * 15 * 256 * 3072 * 2.0));
  // Sends: the two banded steps' four bands and text (the whole sequence's hidden states, bf16), beside the
  // compute; the warm-up step's three sends of all of it, after.
  const double hidden = 768 * 3072 * 2.0;
  REQUIRE(task.collectives.size() == 2);
  CHECK(task.collectives[0].op == CollectiveOp::send_recv);
  CHECK(task.collectives[0].calls == 2 * 5);
  CHECK(task.collectives[0].bytes == Approx(2 * hidden));
  CHECK(task.collectives[0].overlap == 1);
  CHECK(task.collectives[0].group_size == 4);
  CHECK(task.collectives[1].calls == 3);
  CHECK(task.collectives[1].bytes == Approx(3 * hidden));
  CHECK(task.collectives[1].overlap == 0);
  // Hand-worked: the warm-up step is the first stage's whole-image step 57 / 15 times; the two banded steps four
  // bands' times each, and three bands' times to fill and drain; then the warm-up's three sends, each GPU's
  // on its own link.
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  const GpuType& unit = run.cluster.gpu_type(make_id<GpuId>(0));
  StepShape whole_image = task.shape;
  whole_image.patches = 1;
  const double banded = estimate_step(arch("flux-dit"), task.shape, KernelModel(unit), Dtype::bf16).time_s;
  const double whole = estimate_step(arch("flux-dit"), whole_image, KernelModel(unit), Dtype::bf16).time_s;
  const double compute = whole * 57 / 15 + 2 * banded + 3 * banded / 4;
  CHECK(r.end_s - r.compute_start_s == Approx(compute + 3 * (hidden / 100e9 + 2e-6)).epsilon(0.01));
}

TEST_CASE("sequence parallelism is checked against its model and gang", "[profiles][input]") {
  auto with_task = [](const std::string& task) {
    return test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "workflows": {"w": {"tasks": [)" + task + R"(]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})");
  };
  const std::string flux = R"("architecture": "flux-dit", "width": 1024, "height": 1024, "parallel": {"sequence": 4})";
  CHECK(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux + "}}").empty());
  // Every GPU of the gang runs every layer: each holds the whole model, where a gang otherwise shards it.
  const auto sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "gpus": 4, "model": {"id": "m", "weights": "24 GB"}, "work": {)" + flux + R"(}},
                                    {"name": "u", "gpus": 4, "model": {"id": "m", "weights": "24 GB"}, "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  CHECK(sc.workflows[0].tasks[0].weights_per_gpu_bytes() == Approx(24e9));
  CHECK(sc.workflows[0].tasks[1].weights_per_gpu_bytes() == Approx(6e9));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 2, "work": {)" + flux + "}}"),
             Catch::Contains("work/parallel/sequence") && Catch::Contains("\"gpus\" to be 4, found 2"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 5, "work": {"architecture": "flux-dit", "width": 64, "height": 64, "parallel": {"sequence": 5}}})"),
             Catch::Contains("divisor of flux-dit's 24 attention heads"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 2, "work": {"architecture": "sdxl-unet", "width": 64, "height": 64, "parallel": {"sequence": 2}}})"),
             Catch::Contains("family dit") && Catch::Contains("sdxl-unet is a unet"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "collective": {"op": "all-reduce", "bytes": "1 GB"}, "work": {)" + flux + "}}"),
             Catch::Contains("give the task no \"collective\""));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "elastic": {"min_gpus": 2, "restart": "1 s"}, "work": {)" + flux + "}}"),
             Catch::Contains("cannot be elastic"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {"architecture": "flux-dit", "width": 64, "height": 64, "parallel": {"sequense": 4}}})"),
             Catch::Contains("parallel/sequense"));
  // Ring attention needs no head split: five GPUs for FLUX's 24 heads; Ulysses over the rest of a USP gang does.
  const std::string flux_64 = R"("architecture": "flux-dit", "width": 64, "height": 64)";
  CHECK(with_task(R"({"name": "t", "gpus": 5, "work": {)" + flux_64 + R"(, "parallel": {"sequence": 5, "ring": 5}}})").empty());
  CHECK(with_task(R"({"name": "t", "gpus": 6, "work": {)" + flux_64 + R"(, "parallel": {"sequence": 6, "ring": 3}}})").empty());  // Ulysses over 2
  const std::string sd35 = R"("architecture": "sd35-large-mmdit", "width": 64, "height": 64)";  // 38 heads
  CHECK(with_task(R"({"name": "t", "gpus": 8, "work": {)" + sd35 + R"(, "parallel": {"sequence": 8, "ring": 4}}})").empty());
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 8, "work": {)" + sd35 + R"(, "parallel": {"sequence": 8, "ring": 2}}})"),
             Catch::Contains("parallel/ring") && Catch::Contains("Ulysses splits the heads over 4 GPUs") && Catch::Contains("sd35-large-mmdit's 38 attention heads"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux_64 + R"(, "parallel": {"sequence": 4, "ring": 3}}})"),
             Catch::Contains("parallel/ring") && Catch::Contains("expected a divisor of \"sequence\" 4 "));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 2, "work": {)" + flux_64 + R"(, "batch": 2, "parallel": {"cfg": 2, "ring": 2}}})"),
             Catch::Contains("parallel/ring") && Catch::Contains("expected a divisor of \"sequence\" 1 "));
  // The old spelling says what replaced it.
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux_64 + R"(, "parallel": {"sequence": 4, "attention": "ring"}}})"),
             Catch::Contains("parallel/attention") && Catch::Contains("replaced by \"ring\""));
  // PipeFusion, by field.
  const std::string flux_pf = R"("architecture": "flux-dit", "width": 256, "height": 256)";  // 16 latent rows
  CHECK(with_task(R"({"name": "t", "gpus": 8, "work": {)" + flux_pf + R"(, "batch": 2, "parallel": {"pipefusion": 4, "patches": 16, "cfg": 2, "warmup": 0}}})").empty());
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 4, "patches": 17}}})"),
             Catch::Contains("parallel/patches") && Catch::Contains("at most the image's 16"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 64, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 64, "patches": 16}}})"),
             Catch::Contains("parallel/pipefusion") && Catch::Contains("flux-dit's 57 blocks, leave the last of 64 stages none"));
  // 20 stages of ceil(57 / 20) = 3 blocks: 19 take all 57.
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 20, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 20, "patches": 16}}})"),
             Catch::Contains("leave the last of 20 stages none"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 19, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 19, "patches": 16}}})"),
             !Catch::Contains("parallel/"));  // only that the box has 8 GPUs
  // The bands default to the stages: too many for the image's rows is said of the stages.
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 19, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 19}}})"),
             Catch::Contains("parallel/pipefusion") && Catch::Contains("at most the image's 16, found 19 (\"patches\" defaults to the stages)"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 1, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 1, "patches": 4}}})"),
             Catch::Contains("parallel/patches") && Catch::Contains("two or more stages"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 2, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 4}}})"),
             Catch::Contains("parallel/pipefusion") && Catch::Contains("\"gpus\" to be 4, found 2"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 8, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 2, "sequence": 4}}})"),
             Catch::Contains("parallel/pipefusion") && Catch::Contains("not modelled"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 2, "work": {"architecture": "sdxl-unet", "width": 64, "height": 64, "parallel": {"pipefusion": 2}}})"),
             Catch::Contains("parallel/pipefusion") && Catch::Contains("sdxl-unet is a unet"));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux_pf + R"(, "parallel": {"sequence": 4, "patches": 2}}})"),
             Catch::Contains("parallel/patches") && Catch::Contains("give \"pipefusion\""));
  CHECK_THAT(with_task(R"({"name": "t", "gpus": 4, "work": {)" + flux_pf + R"(, "parallel": {"pipefusion": 4, "warmup": -1}}})"),
             Catch::Contains("parallel/warmup"));
  // A video VAE's tiles, by field.
  const std::string hunyuan_vae = R"("architecture": "hunyuan-video-vae-decoder", "width": 256, "height": 256, "frames": 17)";
  CHECK(with_task(R"({"name": "t", "work": {)" + hunyuan_vae + R"(, "tiles": {"size": 16, "overlap": 4, "frames": 2, "frame_overlap": 1}}})").empty());
  CHECK_THAT(with_task(R"({"name": "t", "work": {)" + hunyuan_vae + R"(, "tiles": {"size": 16, "overlap": 16}}})"),
             Catch::Contains("work/tiles/overlap") && Catch::Contains("fewer latent pixels than the tile's size 16"));
  CHECK_THAT(with_task(R"({"name": "t", "work": {)" + flux_64 + R"(, "tiles": {"size": 16}}})"),
             Catch::Contains("work/tiles/size") && Catch::Contains("flux-dit is a dit"));
  CHECK_THAT(with_task(R"({"name": "t", "work": {)" + hunyuan_vae + R"(, "tiles": {"overlap": 4}}})"), Catch::Contains("work/tiles/size"));
  // A model's own code runs only that model.
  CHECK(with_task(R"({"name": "t", "work": {)" + hunyuan_vae + R"(, "runtime": "hunyuanvideo"}})").empty());
  CHECK_THAT(with_task(R"({"name": "t", "work": {)" + flux_64 + R"(, "runtime": "hunyuanvideo"}})"),
             Catch::Contains("work/runtime") && Catch::Contains("runs conv3d-vae-decoder"));
  CHECK_THAT(with_task(R"({"name": "t", "work": {)" + hunyuan_vae + R"(, "tiles": {"size": 16, "sise": 4}}})"), Catch::Contains("work/tiles/sise"));
}

TEST_CASE("a guidance-parallel sampler step runs each half of the batch on its own GPU and gathers the outputs", "[profiles][simulation]") {
  // SDXL at 256x256 with its negative prompt (batch 2), one step, the halves on two unit GPUs.
  const auto sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": 2,
          "work": {"architecture": "sdxl-unet", "steps": 1, "batch": 2, "width": 256, "height": 256, "parallel": {"cfg": 2}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const TaskSpec& task = sc.workflows[0].tasks[0];
  REQUIRE(task.collectives.size() == 1);
  // The denoised latents of both halves, 2 x 4 channels x 32 x 32, bf16, gathered once a step.
  const double gathered = 2 * 4 * 32 * 32 * 2.0;
  CHECK(task.collectives[0].op == CollectiveOp::all_gather);
  CHECK(task.collectives[0].bytes == Approx(gathered));
  const RunResult run = simulate(sc);
  const TaskRecord& r = run.trace.tasks[0];
  StepShape half = task.shape;
  half.batch = 1;
  half.cfg_parallel = 1;
  const GpuType& unit = run.cluster.gpu_type(make_id<GpuId>(0));
  CHECK(r.comm_start_s - r.compute_start_s == Approx(estimate_step(arch("sdxl-unet"), half, KernelModel(unit), Dtype::bf16).time_s));
  // Hand-worked: each GPU sends its half to the other over its 100 GB/s link, two 1-us hops.
  CHECK(r.end_s - r.comm_start_s == Approx(gathered / 2 / 100e9 + 2e-6).epsilon(0.01));
  CHECK_THAT(test::scenario_error(R"({"name": "x", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "t", "gpus": 2, "work": {"architecture": "sdxl-unet", "batch": 3, "width": 64, "height": 64,
                                        "parallel": {"cfg": 2}}}]}}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})"),
             Catch::Contains("work/parallel/cfg") && Catch::Contains("expected an even batch, found 3"));
}
