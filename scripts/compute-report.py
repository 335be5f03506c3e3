#!/usr/bin/env python3
"""Writes reports/compute.md: the kernel-time model against measured kernels.

    python3 scripts/compute-report.py [--fleetsim build/fleetsim] [--out reports/compute.md]

Runs `fleetsim kernels --measured` on Vidur's per-operation profiles (calibrate/data/vidur/compute) and on
published attention benchmarks (calibrate/data/attention), `fleetsim kernels --model` on the catalog's model
architectures at common shapes, and `fleetsim kernels --gemm` on square GEMMs for every catalog GPU.
Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = [  # (title, GPU type, file, dtype, fitted to it)
    ("Vidur, A100 SXM 80GB, fp16", "a100-sxm-80gb", "calibrate/data/vidur/compute/a100.csv", "fp16", True),
    ("Vidur, H100 SXM, fp16", "h100-sxm", "calibrate/data/vidur/compute/h100.csv", "fp16", True),
    ("FlashAttention-2 and PyTorch SDPA (published), H100 SXM, fp16", "h100-sxm", "calibrate/data/attention/h100_fa2_sdpa.csv", "fp16", True),
    ("FlashAttention-2 forward and backward (published), A100 SXM 80GB, fp16", "a100-sxm-80gb", "calibrate/data/attention/a100_fa2_fwd_bwd.csv", "fp16", True),
    ("cuDNN attention (cudnn-frontend's published benchmark), H200, bf16", "h200-sxm", "calibrate/data/attention/h200_cudnn.csv", "bf16", True),
    ("Replication pads at HunyuanVideo's VAE shapes (measured here), H200, bf16", "h200-sxm", "calibrate/data/kernels/h200_replication_pad.csv", "bf16", True),
    # Published attention timings the constants were not fitted to.
    ("cuDNN attention through PyTorch (published, not fitted to), H100 SXM", "h100-sxm", "calibrate/data/attention/h100_cudnn_checks.csv", "bf16", False),
    ("cuDNN and FlashAttention-2 on an H20 (published, not fitted to)", "h20", "calibrate/data/attention/h20_attention_checks.csv", "bf16", False),
    # Measured by this project on one H200 (reports/gpu-validation.md): not fitted to.
    ("PyTorch 2.11 on an H200 at model shapes (measured here), bf16", "h200-sxm", "reports/gpu/h200-kernels-bf16.csv", "bf16", False),
    ("PyTorch 2.11 on an H200 at model shapes (measured here), fp32", "h200-sxm", "reports/gpu/h200-kernels-fp32.csv", "fp32", False),
]


# Published end-to-end timings of whole images: the parts of each pipeline (architecture, shape, how many
# times), the runtime and dtype it ran, the measured seconds and where they come from.
SD15_DIFFUSERS = [("sd15-unet", "batch=2,width=512,height=512", 50), ("clip-l-text", "batch=2,tokens=77", 1),
                  ("sd-vae-decoder", "width=512,height=512", 1)]
# SGLang's HunyuanVideo VAE tiles (256 pixels, 16 frames, at strides of 192 and 12) in latent units.
SGLANG_HUNYUAN_TILES = "tile=32,tile_overlap=8,tile_frames=5,tile_frame_overlap=2"
# HunyuanVideo's own code (Tencent-Hunyuan/HunyuanVideo hyvideo/vae/autoencoder_kl_causal_3d.py, the checkpoint's
# sample_size 256 and sample_tsize 64): tiles of 32 latent pixels every 24, of 17 latent frames every 12.
OWN_HUNYUAN_TILES = "tile=32,tile_overlap=8,tile_frames=17,tile_frame_overlap=5"
DIFFUSION_CHECKS = [
    {"title": "SD 1.5, 512x512, 50 steps", "gpu": "a100-sxm-80gb", "runtime": "diffusers", "dtype": "fp16", "parts": SD15_DIFFUSERS,
     "measured_s": 1.591, "fitted": True,
     "source": "fal-ai/stable-diffusion-benchmarks README, SD1.5 end-to-end, SDPA, PyTorch 2.1"},
    {"title": "SD 1.5, 512x512, 50 steps", "gpu": "a100-sxm-80gb", "runtime": "compiled", "dtype": "fp16", "parts": SD15_DIFFUSERS,
     "measured_s": 0.819, "source": "the same table, TensorRT"},
    {"title": "SD 1.5, 512x512, 50 steps", "gpu": "h100-pcie", "runtime": "diffusers", "dtype": "fp16", "parts": SD15_DIFFUSERS,
     "measured_s": 1.44, "source": "alexeigor/sd-benchmarks README, H100 PCIe, eager"},
    {"title": "SD 3.5 Large, 1024x1024, 50 steps", "gpu": "h100-sxm", "runtime": "diffusers", "dtype": "bf16",
     "parts": [("sd35-large-mmdit", "batch=2,width=1024,height=1024", 50), ("clip-l-text", "batch=2,tokens=77", 1),
               ("clip-g-text", "batch=2,tokens=77", 1), ("t5-xxl-encoder", "batch=2,tokens=256", 1),
               ("flux-vae-decoder", "width=1024,height=1024", 1)],
     "measured_s": 11.615, "source": "microsoft/onnxruntime pull request 22986, H100 table, PyTorch 2.5.1 eager"},
    {"title": "SD 3.5 Large, 1024x1024, 50 steps", "gpu": "h100-sxm", "runtime": "compiled", "dtype": "bf16",
     "parts": [("sd35-large-mmdit", "batch=2,width=1024,height=1024", 50), ("clip-l-text", "batch=2,tokens=77", 1),
               ("clip-g-text", "batch=2,tokens=77", 1), ("t5-xxl-encoder", "batch=2,tokens=256", 1),
               ("flux-vae-decoder", "width=1024,height=1024", 1)],
     "part_runtime": {"clip-l-text": "diffusers", "clip-g-text": "diffusers", "t5-xxl-encoder": "diffusers", "flux-vae-decoder": "diffusers"},
     "measured_s": 7.466, "source": "the same table, torch.compile of the transformer"},
    {"title": "FLUX.1-dev, 512x512, 50 steps", "gpu": "l40s", "runtime": "diffusers", "dtype": "bf16",
     "parts": [("flux-dit", "width=512,height=512,context=512", 50), ("clip-l-text", "tokens=77", 1), ("t5-xxl-encoder", "tokens=512", 1),
               ("flux-vae-decoder", "width=512,height=512", 1)],
     "measured_s": 8.71, "fitted": True,
     "source": "pruna.ai blog, comparison-flux-torch-compile-tensor-rt-pruna, eager (Ada's L2 speed-up fitted to it; the rest Ampere's)"},
    {"title": "SDXL, 1024x1024, 20 steps", "gpu": "rtx-4090", "runtime": "diffusers", "dtype": "fp16",
     "parts": [("sdxl-unet", "batch=2,width=1024,height=1024", 20), ("clip-l-text", "tokens=77", 1), ("clip-g-text", "tokens=77", 1),
               ("sd-vae-decoder", "width=1024,height=1024", 1)],
     "part_dtype": {"sd-vae-decoder": "fp32"}, "guess": True, "measured_s": 2.76,
     "source": "siliconflow/onediff onediff_diffusers_extensions/examples/sdxl/README.md, its 2024-07-31 table: \"PyTorch E2E time\" "
               "(8.44 it/s), diffusers fp16 without compilation, batch 1; the negative prompt empty, so its embeddings are zeros "
               "and each text encoder runs once (force_zeros_for_empty_prompt); the VAE in fp32 (SDXL's force_upcast)"},
    {"title": "FLUX.1-dev, 1024x1024, 20 steps", "gpu": "h20", "runtime": "diffusers", "dtype": "bf16",
     "parts": [("flux-dit", "width=1024,height=1024,context=512", 20), ("clip-l-text", "tokens=77", 1), ("t5-xxl-encoder", "tokens=512", 1),
               ("flux-vae-decoder", "width=1024,height=1024", 1)],
     "guess": True, "measured_s": 14.94,
     "source": "siliconflow/onediff onediff_diffusers_extensions/examples/flux/README.md, its 2024-11-13 H20 table: \"PyTorch E2E "
               "time\" (1.38 it/s), diffusers bf16 without compilation"},
    {"title": "Wan 2.1 VAE decode alone, 81 frames at 1280x720", "gpu": "a800-sxm-80gb", "runtime": "diffusers", "dtype": "bf16",
     "parts": [("wan21-vae-decoder", "width=1280,height=720,frames=81", 1)], "measured_s": 9.256,
     "source": "nono-Sang/FastVAE README, Wan2_1 table, 1 process: diffusers AutoencoderKLWan, 5 s of 720p video, A800, bf16, after a warm-up. "
               "Its README (2026-03-16 to 03-20) predates diffusers' fp32 RMS norm (pull request 13316, 2026-03-24), which the "
               "runtime's pinned code runs: with the bf16 norm FastVAE's diffusers ran, the model gave 7.98 s (-13.8%)"},
    {"title": "Wan 2.2 5B VAE decode alone, 121 frames at 1280x704", "gpu": "b200", "runtime": "diffusers", "dtype": "bf16",
     "parts": [("wan22-vae-decoder", "width=1280,height=704,frames=121", 1)], "measured_s": 4.024,
     "source": "NVIDIA/TensorRT-LLM pull request 17262, description: FastWan2.2 TI2V-5B's VAE decode alone on one B200, its "
               "\"Diffusers bf16\" column, 4,024 ms; whether it ran tiled is not stated (whole here); Blackwell runs on Ampere's "
               "kernel constants here, a guess; which diffusers it ran (before or after its fp32 RMS norm) is not stated"},
    {"title": "HunyuanVideo VAE decode alone, 65 frames at 848x480, tiled", "gpu": "h100-sxm", "runtime": "diffusers", "dtype": "fp16",
     "parts": [("hunyuan-video-vae-decoder", "width=848,height=480,frames=65," + SGLANG_HUNYUAN_TILES, 1)],
     "measured_s": 15.5146,
     "source": "sgl-project/sglang pull request 22814 (2026-04-14), description: DecodingStage 15,514.60 ms on one H100 before its fused "
               "GroupNorm+SiLU (14,548.95 ms after). SGLang's HunyuanVideo config runs the VAE in fp16 with tiling on: 256-pixel, "
               "16-frame tiles at strides of 192 and 12 (read from its config files, not the PR), timed here as ComfyUI places tiles "
               "(diffusers' temporal tiling adds a sixth, 2-frame tile: the prediction is some 7% of the work short). Likely on a slow "
               "path (below)"},
    {"title": "HunyuanVideo VAE decode alone, 61 frames at 512x320", "gpu": "h100-sxm", "runtime": "diffusers", "dtype": "fp16",
     "parts": [("hunyuan-video-vae-decoder", "width=512,height=320,frames=61", 1)], "measured_s": 2.5, "row_mask_decode": True,
     "source": "madebyollin/taehv README, the full HunyuanVideo VAE's \"Runtime (in fp16, on GH200)\": \"~2-3 s\", taken as 2.5; "
               "a GH200 timed as an H100 SXM; whole or tiled not stated (whole here). Likely on a slow path (below)"},
    {"title": "HunyuanVideo VAE decode alone, 77 frames at 848x480, tiled", "gpu": "h200-sxm", "runtime": "diffusers", "dtype": "fp16",
     "parts": [("hunyuan-video-vae-decoder", "width=848,height=480,frames=77," + SGLANG_HUNYUAN_TILES, 1)],
     "measured_s": 5.713, "recent_hunyuan_decode": True,
     "source": "sgl-project/sglang pull request 36012 (2026-08-22), description: the mean decode of its main branch, a sequential tiled "
               "decode on one of four H200s (the others idle), eager, 848x480x77, 'lossless', 5.713 s; SGLang's tiles as in pull "
               "request 22814's row, its GroupNorm+SiLU fused by then (pull request 23148), which the model's diffusers runtime does "
               "not fuse"},
]


def fleetsim(binary, *args):
    return json.loads(subprocess.run([binary, *args, "--json"], check=True, capture_output=True, text=True, cwd=ROOT).stdout)


def pct(x):
    return "%.1f%%" % (100 * x)


def spct(x):
    return "%+.1f%%" % (100 * x)


def quantile(values, q):
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def fitted_constants():
    """models/kernels.json as shipped."""
    with open(os.path.join(ROOT, "models", "kernels.json")) as f:
        return json.load(f)


def diffusers_part_s(args, gpu, model, shape, runtime="diffusers"):
    """A part a pipeline runs once (a text encoder, a VAE decode), under diffusers' eager code (or `runtime`) in fp16: seconds."""
    return fleetsim(args.fleetsim, "kernels", "--gpu", gpu, "--model", model, "--shape", shape, "--runtime", runtime,
                    "--dtype", "fp16")["time_s"]


def pipefusion_section(w, args):
    """SD3 Medium's sampler on an HGX A100 box in xDiT's splits (scenarios/studies/xdit-sd3-a100.json) against its table."""
    study = os.path.join("scenarios", "studies", "xdit-sd3-a100.json")
    task = "/workflows/sd3/tasks/0"
    splits = {1: ["gpus=1", "work/parallel/pipefusion=1", "work/parallel/cfg=1"], 2: ["gpus=2", "work/parallel/pipefusion=1"],
              4: ["gpus=4", "work/parallel/pipefusion=2"], 8: []}

    def steps_s(runtime, sets):
        flags = []
        for kv in sets + ["work/runtime=" + runtime]:
            flags += ["--set", task + "/" + kv]
        return fleetsim(args.fleetsim, "simulate", study, *flags)["makespan_s"]

    def part_s(model, shape):
        return diffusers_part_s(args, "a100-sxm-80gb", model, shape)

    clip_l, clip_g = part_s("clip-l-text", "tokens=77,batch=2"), part_s("clip-g-text", "tokens=77,batch=2")
    t5, vae = part_s("t5-xxl-encoder", "tokens=256,batch=2"), part_s("flux-vae-decoder", "width=1024,height=1024")
    once = clip_l + clip_g + t5 + vae
    xdit = {1: 3.09, 2: 1.73, 4: 1.31, 8: 0.90}  # read off xDiT's plot by eye
    w("## One image across GPUs: PipeFusion against xDiT\n")
    w("Stable Diffusion 3 Medium at 1024x1024, 20 steps with guidance (batch 2), on one HGX A100 box (`hgx-a100-8`) as "
      "xDiT's benchmark runs it: one GPU; the guidance halves on two (`\"cfg\": 2`); and each half's transformer in two or "
      "four PipeFusion stages (`\"cfg\": 2, \"pipefusion\": 2` or `4`, bands as many as the stages, xDiT's default, one "
      "warm-up step). Command: `fleetsim simulate scenarios/studies/xdit-sd3-a100.json --json` (makespan: the sampler's "
      "steps), with the `--set` lines its description gives for the other rows and `/workflows/sd3/tasks/0/work/runtime="
      "compiled` for torch.compile. xDiT's figures are whole images (its docs/performance/sd3.md, 8xA100 NVLink; the "
      "seconds read off its plot by eye, xdit-project/xdit_assets performance/sd3/A100-SD3.png; the plot does not say "
      "which rows ran under torch.compile, which the page says helped on all but eight GPUs). So each predicted row adds "
      "the parts xDiT runs once on one GPU, timed by `fleetsim kernels --gpu a100-sxm-80gb --runtime diffusers`: CLIP-L "
      "and CLIP-G at 77 tokens and T5-XXL at 256 (batch 2: %.1f, %.1f and %.1f ms) and the 16-channel VAE's decode "
      "(`flux-vae-decoder`, SD3's, %.1f ms), %.3f s in all, the same under both runtimes. Not fitted to.\n"
      % (1e3 * clip_l, 1e3 * clip_g, 1e3 * t5, 1e3 * vae, once))
    w("| runtime | GPUs | steps s | image s | speed-up | xDiT s | xDiT speed-up | speed-up error | time error |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    errors, time_errors, eight = {}, {}, {}
    for runtime in ("diffusers", "compiled"):
        one = steps_s(runtime, splits[1]) + once
        for k in (1, 2, 4, 8):
            steps = steps_s(runtime, splits[k])
            if k == 8:
                eight[runtime] = steps
            image = steps + once
            speedup, measured = one / image, xdit[1] / xdit[k]
            errors[runtime, k] = speedup / measured - 1
            time_errors[runtime, k] = image / xdit[k] - 1
            w("| %s | %d | %.3f | %.3f | %.2f | %.2f | %.2f | %s | %s |"
              % (runtime, k, steps, image, speedup, xdit[k], measured, spct(speedup / measured - 1), spct(image / xdit[k] - 1)))
    bands = [steps_s("diffusers", ["gpus=4", "work/parallel/pipefusion=2", "work/parallel/patches=%d" % p]) for p in (8, 16)]
    compiled_worst = max(abs(errors["compiled", k]) for k in (2, 4, 8))
    host_us = json.load(open(os.path.join(ROOT, "models", "kernels.json")))["host"]["eager_dispatch_us"]
    w("\nUnder torch.compile the speed-ups are within %.0f%% at 2, 4 and 8 GPUs. Under diffusers' eager code the eight-GPU "
      "one is %.0f%% short: four stages of six blocks, each step four bands of 1,024 image tokens with the 333 text tokens "
      "each, launch about as many kernels a step as two stages of two bands do, and at the model's %g us of host a launch "
      "(models/kernels.json, `eager_dispatch_us`, fitted on a host-bound diffusers case) both are bound by the host (%.2f s "
      "of steps at eight GPUs eager against %.2f s compiled, the same kernels' work fused and launched from a graph), where xDiT's eight-GPU run was not: its page says "
      "torch.compile did not help there. xDiT's host may launch faster than the fitted one, or its eight-GPU row ran under "
      "different settings (its benchmark sweeps bands and warm-up steps); neither is known here. The one-GPU image is "
      "%.0f%% faster than xDiT's (%.0f%% compiled), about the same share as at two GPUs: the single-GPU step, not the "
      "parallelism, is where that gap is (SD3 Medium's step is not checked against any other published figure here). "
      "Bands as many as 8 or 16 make the eager runs slower still (two stages: %.2f and %.2f s of steps), which is what an "
      "eager host does with small kernels; no published figure checks it.\n"
      % (100 * compiled_worst, -100 * errors["diffusers", 8], host_us, eight["diffusers"], eight["compiled"],
         -100 * time_errors["diffusers", 1], -100 * time_errors["compiled", 1], bands[0], bands[1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fleetsim", default=os.path.join(ROOT, "build", "fleetsim"))
    parser.add_argument("--out", default=os.path.join(ROOT, "reports", "compute.md"))
    args = parser.parse_args()
    version = subprocess.run([args.fleetsim, "--version"], capture_output=True, text=True).stdout.strip()
    out = []
    w = out.append
    w("# Compute: the kernel-time model against measured kernels\n")
    w("Made by `python3 scripts/compute-report.py` (%s). Each set is `fleetsim kernels --gpu GPU --dtype DTYPE --measured FILE`: "
      "every measured kernel predicted from its shape by the kernel-time model (`sim/src/compute/kernel_model.cpp`, constants "
      "in `models/kernels.json`). Error = (predicted - measured) / measured; bias is the median signed error.\n" % version)
    w("The A100 and H100 GEMM and memory-bound constants were fitted to the Vidur sets below (`python3 scripts/fit-kernels.py`, "
      "which runs `fleetsim kernels --fit`), and the A100 and H100 attention constants (and Hopper's cuDNN attention) to the "
      "attention sets marked fitted: these errors are "
      "in-sample. They show the model's shape can follow the measurements with a few constants per architecture; "
      "end-to-end steps it was not fitted to are the test of it, and so are the H200 sets (kernels this project timed on "
      "one H200 through PyTorch 2.11, `scripts/gpu-kernel-probe.py`; [gpu-validation.md](gpu-validation.md) has them "
      "warm and cold, with convolutions and the attention backends).\n")
    for title, gpu, path, dtype, fitted in SETS:
        doc = fleetsim(args.fleetsim, "kernels", "--gpu", gpu, "--dtype", dtype, "--measured", path)
        rows = doc["rows"]
        w("## %s\n" % title)
        w("`%s`, %d kernels%s.\n" % (path, len(rows), ", fitted to" if fitted else ""))
        w("| class | rows | median \\|error\\| | p90 | bias | worst |")
        w("|---|---:|---:|---:|---:|---:|")
        for cls, s in doc["classes"].items():
            w("| %s | %d | %s | %s | %s | %s |" % (cls, s["rows"], pct(s["median_abs_error"]), pct(s["p90_abs_error"]),
                                               spct(s["median_error"]), spct(s["worst_error"])))
        ops = {}
        for r in rows:
            ops.setdefault(r["name"].split("/")[-1], []).append(r)
        if "vidur" in path:
            w("\nBy operation (Vidur's names), split by size (m, tokens):\n")
            w("| operation | m <= 64 | 64 < m <= 512 | m > 512 | all |")
            w("|---|---:|---:|---:|---:|")
            for op, rs in sorted(ops.items()):
                cells = []
                for lo, hi in ((0, 64), (64, 512), (512, 1e12), (0, 1e12)):
                    e = [abs(r["error"]) for r in rs if lo < r["m"] <= hi]
                    cells.append("%s (%d)" % (pct(quantile(e, 0.5)), len(e)) if e else "-")
                w("| %s | %s |" % (op, " | ".join(cells)))
        elif path.startswith("reports/gpu/"):
            w("\n| kernel | m | n | k | measured (us) | predicted (us) | error |")
            w("|---|---:|---:|---:|---:|---:|---:|")
            for r in rows:
                w("| %s | %d | %d | %d | %.1f | %.1f | %s |" % (r["name"], r["m"], r["n"], r["k"], r["measured_s"] * 1e6, r["time_s"] * 1e6,
                                                          spct(r["error"])))
        else:
            sources = {}
            for r in rows:
                sources.setdefault(r["name"].split("/")[0], []).append(r)
            w("\nBy source (the `README.md` beside the file says where each comes from):\n")
            w("| source | rows | median \\|error\\| | bias |")
            w("|---|---:|---:|---:|")
            for src, rs in sources.items():
                w("| %s | %d | %s | %s |" % (src, len(rs), pct(quantile([abs(r["error"]) for r in rs], 0.5)),
                                           spct(quantile([r["error"] for r in rs], 0.5))))
            w("\n| kernel | measured (us) | predicted (us) | error |")
            w("|---|---:|---:|---:|")
            for r in rows:
                w("| %s | %.1f | %.1f | %s |" % (r["name"], r["measured_s"] * 1e6, r["time_s"] * 1e6, spct(r["error"])))
        worst = sorted(rows, key=lambda r: -abs(r["error"]))[:5]
        w("\nWorst rows: " + "; ".join("%s m=%d n=%d k=%d %s" % (r["name"], r["m"], r["n"], r["k"], spct(r["error"])) for r in worst) + ".\n")

    w("## Model steps\n")
    w("`fleetsim kernels --gpu GPU --model ARCHITECTURE --shape SHAPE --runtime comfyui|compiled`: one step's kernels "
      "(`sim/src/compute/model_profile.cpp`) timed by the model above. *ComfyUI* is its eager PyTorch code (a kernel per "
      "operator as `models/runtimes.json` lists them: fp32 upcasts in RMSNorm and rotary embeddings, broadcast "
      "modulation, NCHW activations and filters around cuDNN's convolutions, 29 us of host time per launch); *compiled* fuses the "
      "elementwise work and launches from a graph. LLM steps run compiled by default, as engines run them. Milliseconds "
      "per step; in brackets the achieved share of the dense peak. These are predictions: none of these steps was "
      "measured here or fitted to.\n")
    steps = [("sd15-unet", "batch=2,width=512,height=512", "SD 1.5 UNet, 512x512, with its negative prompt"),
             ("sdxl-unet", "batch=2,width=1024,height=1024", "SDXL UNet, 1024x1024, with its negative prompt"),
             ("flux-dit", "batch=1,width=1024,height=1024,context=256", "FLUX.1 DiT, 1024x1024, 256 text tokens"),
             ("sd35-large-mmdit", "batch=2,width=1024,height=1024", "SD 3.5 Large MMDiT, 1024x1024, with its negative prompt"),
             ("wan21-14b-dit", "batch=1,width=1280,height=720,frames=81", "Wan 2.1 14B, 81 frames at 1280x720"),
             ("sd-vae-decoder", "batch=1,width=1024,height=1024", "SD/SDXL VAE decode, 1024x1024"),
             ("wan21-vae-decoder", "batch=1,width=1280,height=720,frames=81", "Wan 2.1 VAE decode (causal 3D), 81 frames at 1280x720"),
             ("wan22-vae-decoder", "batch=1,width=1280,height=704,frames=121", "Wan 2.2 5B VAE decode (causal 3D, 16x), 121 frames at 1280x704"),
             ("hunyuan-video-vae-decoder", "batch=1,width=848,height=480,frames=65", "HunyuanVideo VAE decode (3D, whole), 65 frames at 848x480"),
             ("real-esrgan-x4", "batch=1,width=1024,height=1024", "Real-ESRGAN x4 of a 1024x1024 image"),
             ("t5-xxl-encoder", "tokens=256", "T5-XXL encoder, 256 tokens"),
             ("llama-3-8b", "batch=32,tokens=1,context=2048", "Llama-3-8B decode, 32 sequences at 2k context")]
    gpus = (("a100-sxm-80gb", "A100"), ("h100-sxm", "H100"))
    w("| step | TFLOP | " + " | ".join("%s ComfyUI | %s compiled" % (name, name) for _, name in gpus) + " |")
    w("|---|---:|" + "---:|---:|" * len(gpus))
    for arch, shape, title in steps:
        cells, flop = [], 0
        for gpu, _ in gpus:
            for runtime in ("comfyui", "compiled"):
                e = fleetsim(args.fleetsim, "kernels", "--gpu", gpu, "--model", arch, "--shape", shape, "--runtime", runtime)
                flop = e["flop"]
                peak = 312e12 if gpu.startswith("a100") else 989e12
                cells.append("%.3g (%.0f%%)" % (e["time_s"] * 1e3, 100 * e["flop"] / e["time_s"] / peak))
        w("| %s | %.3g | %s |" % (title, flop / 1e12, " | ".join(cells)))
    w("")

    w("## Diffusion: whole images and VAE decodes against published timings\n")
    w("Each image is its pipeline's parts, each timed by `fleetsim kernels --gpu GPU --model ARCHITECTURE --shape SHAPE "
      "--runtime RUNTIME --dtype DTYPE`: the denoiser's step times the steps, the text encoders and the VAE decode once. "
      "Guidance doubles the denoiser's batch. Seconds per image, error = (predicted - measured) / measured. *Fitted* marks "
      "the figure a constant was fitted to (`models/kernels.json` says which); the others were not fitted to. Held out, and "
      "not used here or in any fit: FLUX.1-dev and SDXL at 1024x1024 on A100 and H100. *Constants a guess* marks a GPU "
      "whose kernel constants were fitted on another (the RTX 4090's on the L40S, with Ampere's borrowed; the H20's on the "
      "H100): those rows check how the shares of peak carry over.\n")
    w("| image | GPU | runtime | predicted s | measured s | error | source |")
    w("|---|---|---|---:|---:|---:|---|")
    for check in DIFFUSION_CHECKS:
        total = 0
        for arch, shape, times in check["parts"]:
            e = fleetsim(args.fleetsim, "kernels", "--gpu", check["gpu"], "--model", arch, "--shape", shape,
                         "--runtime", check.get("part_runtime", {}).get(arch, check["runtime"]),
                         "--dtype", check.get("part_dtype", {}).get(arch, check["dtype"]))
            total += times * e["time_s"]
        error = (total - check["measured_s"]) / check["measured_s"]
        if check.get("recent_hunyuan_decode"):
            hunyuan_recent_error = error
        if check.get("row_mask_decode"):
            taehv_s = total
        w("| %s%s | %s%s | %s | %.3g | %.3g | %s | %s |" % (check["title"], " (fitted)" if check.get("fitted") else "", check["gpu"],
                                                         " (constants a guess)" if check.get("guess") else "",
                                                       check["runtime"], total, check["measured_s"], spct(error), check["source"]))
    w("\nThe VAE decode rows are the video models' 3D decoders: Wan 2.1's causal one (`wan21-vae-decoder`: one latent frame "
      "a call, the frames before it kept and padded in, as diffusers and ComfyUI run it) and HunyuanVideo's "
      "(`hunyuan-video-vae-decoder`: 3x3x3 convolutions over the whole clip or each tile), and Wan 2.2 5B's "
      "(`wan22-vae-decoder`, Wan 2.1's layout at 16x with residual upsamplings). Their 3x3x3 convolutions are "
      "timed as implicit GEMMs at the GEMM class's rates (some 690 TFLOP/s in fp16 on an H100; measured on an H200 since, "
      "below). None of the rows is fitted to (kept as "
      "checks). Of the three HunyuanVideo figures, the two older ones take about two and a half times the model's time and the "
      "newest, SGLang's of August 2026 on an H200, comes %s of it: what the code ran decides it, as below. GroupNorm over whole "
      "clips (a CTA per sample and group) is the model's largest share of the decode (about a third; the replication pads "
      "a fifth); SGLang's fused "
      "kernel for it saved 1 s of the 15.5.\n" % ("within %.1f%%" % abs(100 * hunyuan_recent_error)))
    taehv_host_s = fitted_constants()["host"]["eager_dispatch_us"] * 1e-6
    w("What the 3D convolutions reach depends on the software path, which the two older figures do not state. Published cuDNN 3x3x3 "
      "convolutions at these widths (128-512 channels) ran at 146-219 TFLOP/s on an A100 in fp16, 47-70% of its peak, "
      "about the GEMM class's share (xwang233/code-snippet, conv3d-channels-last/a100, cuDNN 8.0.5; NCDHW the lower "
      "figures, channels-last the higher). But PyTorch 2.9.0 turned cuDNN off for fp16 and bf16 3D convolutions (a cuDNN "
      "9.8-9.10 wrong-result bug, pytorch/pytorch issue 163539), falling back to vol2col, reported about four times "
      "slower (pytorch/pytorch issue 166122); 2.9.1 uses cuDNN again only where 9.15 or later is installed; and on Hopper, NCDHW 3D "
      "convolutions ran 2.7-3.7 times slower than channels-last ones (sgl-project/sglang pull request 27431). Either "
      "would account for a factor of three. Measured here since, on an H200 with PyTorch 2.11 and cuDNN 9.19 "
      "([gpu-validation.md](gpu-validation.md)), HunyuanVideo's 3x3x3 convolutions take 5-23% longer than the GEMM: the "
      "model times cuDNN's good path, and SGLang's August 2026 decode agrees with it (SGLang's install script pins cuDNN "
      "9.16, 'less than 9.16.0.29 will cause performance regression on Conv3D kernel': scripts/ci/ci_install_dependency.sh). Read "
      "from the code and its history, not measured (so not modelled): SGLang's April 2026 decode (pull request 22814) "
      "was most likely on the fallback, its main branch then on PyTorch 2.9.1 (its issue 18066) whose wheels ship cuDNN "
      "9.10, below 9.15, and six days later its author found an LTX decode spending much of its time in "
      "`slow_conv_dilated3d` and vol2col (pull request 23200); its decode also ran under fp16 autocast, which runs "
      "GroupNorm in fp32. The taehv figure (March 2025, 'fp16 Diffusers') predates diffusers 0.33: until then diffusers' "
      "HunyuanVideo VAE built the mid-block attention's causal mask one row at a time, a kernel a row, some 41,000 rows "
      "for that clip whole (huggingface/diffusers pull request 10764, 'multiple seconds per step for larger videos'; "
      "Tencent-Hunyuan/HunyuanVideo pull request 208, the same fix, still open), which HunyuanVideo's own code, the one "
      "xDiT ran (below), still does: `--runtime hunyuanvideo` times that code's decode, a launch a row. " +
      "At the model's 29 us a launch those 40,960 rows (16 latent frames of 40 x 64) alone would take %.2f s, which with "
      "the model's %.3f s makes %.2f s of taehv's '~2-3 s' (a what-if, not a row of the table: which diffusers taehv ran is "
      "not stated).\n" % (40960 * taehv_host_s, taehv_s, taehv_s + 40960 * taehv_host_s))

    w("## One step across GPUs: sequence parallelism against xDiT\n")
    w("HunyuanVideo at 1280x720, 129 frames, 50 steps on one HGX node of eight H100s or eight H20s, the transformer's "
      "steps split by sequence over 1, 2, 4 and 8 GPUs (`\"parallel\": {\"sequence\": k}` in a scenario's work, diffusers' "
      "eager code): each GPU runs its shard of the tokens and heads, and each attention layer's four all-to-alls run on "
      "the node's NVLink (`fleetsim simulate`, makespan). xDiT's figures are whole videos (its Ulysses rows in "
      "xdit-project/xDiT docs/performance/hunyuanvideo.md: H100 and H20 with HunyuanVideo's own code). The model's steps "
      "alone, and the whole video: the steps plus the parts run once on one GPU, the text encoders (LLaVA-Llama-3-8B as "
      "`llama-3-8b` over 256 tokens and CLIP-L over 77, no guidance batch: HunyuanVideo's guidance is embedded; "
      "`fleetsim kernels --runtime diffusers --dtype fp16`) and the VAE decode as HunyuanVideo's own code runs it "
      "(`fleetsim kernels --model hunyuan-video-vae-decoder --runtime hunyuanvideo --dtype fp16 --shape "
      "width=1280,height=720,frames=129,%s`: its tiles, its attention mask a row at a time, its GroupNorm under fp16 "
      "autocast; below). Not fitted to.\n" % OWN_HUNYUAN_TILES)
    w("| GPU | GPUs | steps s | speed-up | video s | speed-up | xDiT s | xDiT speed-up | speed-up error, steps | speed-up error, video |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    xdit = {"h100": {1: 1904.08, 2: 925.04, 4: 514.08, 8: 337.58}, "h20": {1: 6639.17, 2: 3400.55, 4: 1762.86, 8: 940.97}}
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for gpu in ("h100", "h20"):
            for k in (1, 2, 4, 8):
                work = {"architecture": "hunyuan-video-dit", "runtime": "diffusers", "steps": 50, "width": 1280, "height": 720, "frames": 129}
                if k > 1:
                    work["parallel"] = {"sequence": k}
                scenario = {"name": "sp%d" % k, "cluster": {"nodes": [{"type": "hgx-%s-8" % gpu, "count": 1}]},
                            "workflows": {"w": {"tasks": [{"name": "denoise", "gpus": k, "work": work}]}},
                            "workload": [{"workflow": "w", "arrival": {"process": "once"}}]}
                path = os.path.join(tmp, "sp-%s-%d.json" % (gpu, k))
                with open(path, "w") as f:
                    json.dump(scenario, f)
                times[gpu, k] = fleetsim(args.fleetsim, "simulate", path)["makespan_s"]
    gpu_id = {"h100": "h100-sxm", "h20": "h20"}
    clip = "width=1280,height=720,frames=129,"
    vae = {g: diffusers_part_s(args, gpu_id[g], "hunyuan-video-vae-decoder", clip + OWN_HUNYUAN_TILES, "hunyuanvideo") for g in gpu_id}
    vae_diffusers = diffusers_part_s(args, "h100-sxm", "hunyuan-video-vae-decoder", clip + SGLANG_HUNYUAN_TILES)
    encoders = {g: diffusers_part_s(args, gpu_id[g], "llama-3-8b", "tokens=256") + diffusers_part_s(args, gpu_id[g], "clip-l-text", "tokens=77")
                for g in gpu_id}
    video_errors = {}
    for gpu in ("h100", "h20"):
        once = vae[gpu] + encoders[gpu]
        for k in (1, 2, 4, 8):
            speedup, measured = times[gpu, 1] / times[gpu, k], xdit[gpu][1] / xdit[gpu][k]
            video = (times[gpu, 1] + once) / (times[gpu, k] + once)
            video_errors[gpu, k] = video / measured - 1
            w("| %s | %d | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %s | %s |"
              % (gpu.upper(), k, times[gpu, k], speedup, times[gpu, k] + once, video, xdit[gpu][k], measured,
                 spct(speedup / measured - 1), spct(video_errors[gpu, k])))
    vae_s = vae["h100"]
    video_worst = max(abs(e) for e in video_errors.values())

    def h100_8_error(once):
        """The eight-H100 whole-video speed-up's error against xDiT's, with `once` seconds run once beside the steps."""
        return (times["h100", 1] + once) / (times["h100", 8] + once) / (xdit["h100"][1] / xdit["h100"][8]) - 1

    # The mask rows' host time is the fitted launch cost; at 10 and 20 us, the same decode.
    host_s = fitted_constants()["host"]["eager_dispatch_us"] * 1e-6
    row_host = {}
    for us in (10, 20):
        constants = fitted_constants()
        constants["host"]["eager_dispatch_us"] = us
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(constants, f)
        try:
            decode = fleetsim(args.fleetsim, "kernels", "--gpu", "h100-sxm", "--model", "hunyuan-video-vae-decoder", "--shape", clip + OWN_HUNYUAN_TILES,
                              "--runtime", "hunyuanvideo", "--dtype", "fp16", "--kernels", f.name)["time_s"]
        finally:
            os.unlink(f.name)
        row_host[us] = (decode, h100_8_error(decode + encoders["h100"]))
    diffusers_error = h100_8_error(vae_diffusers + encoders["h100"])
    h20_worst = max(abs(times["h20", 1] / times["h20", k] / (xdit["h20"][1] / xdit["h20"][k]) - 1) for k in (2, 4, 8))
    mask_rows = (32 * 3 + 18) * (32 * 6 + 16) * (17 + 17 + 9)  # every tile's voxels at the middle block (the test hand-works it)
    w("\nxDiT's times fit a serial part beside the divided one (T = A / k + B gives B of about 110 s from its 1- and 8-GPU "
      "H100 rows, 127 s from its H20 rows), which its text encoders and VAE decode would be. HunyuanVideo's own code "
      "decodes in tiles of 256 pixels and 64 frames (17 latent frames every 12: 84 tiles for this clip), and each tile's "
      "decoder call builds its attention mask a row at a time (above): %s rows, each a fill the host launches, %.1f s at "
      "the model's 29 us a launch (a guess for an indexed assignment; meanwhile the GPU works off the tile before's upper "
      "levels); its GroupNorm runs in fp32 under fp16 autocast, with casts around it, and a ResNet block's convolution "
      "pads that fp32 output (twice a pad's bytes). The model gives that decode %.1f s on one "
      "H100 (%.1f s on an H20), where diffusers' current code in its own tiles takes %.1f s (what this table used before "
      "2026-12-05; the model's decodes come within %.1f%% of SGLang's recent one, above). With the parts run once added "
      "(that decode and the text encoders' %.2f s), the whole video's speed-ups are within %.1f%% of xDiT's at 2, 4 and 8 "
      "GPUs on both (the eight-H100 one %s, %s with diffusers' decode): the model's serial part is %.0f s of the 110 s "
      "xDiT's H100 rows imply. The rest is not accounted for here (the tiles' blends, a Python loop over 64 rows and 64 "
      "columns a tile on the GPU, are not modelled). The rows' 29 us is the launch cost fitted on a diffusers step, a guess "
      "for a Python loop of indexed assignments, and it carries over half of the decode: at 10 us a row the decode takes "
      "%.1f s and the eight-H100 error is %s, at 20 us %.1f s and %s. This runtime was modelled after the +22.4%% was "
      "known, from the code xDiT ran; nothing in it was fitted to xDiT's rows, but its agreement with them is not "
      "independent of that. The steps are timed as diffusers' code runs them; Tencent's, which "
      "xDiT ran, differs in ways read from its code (hyvideo/modules/, fa14b00) and not modelled: the transformer runs "
      "under bf16 autocast, so each LayerNorm and its modulation run in fp32 with casts around them; the rotary tables "
      "live on the host and are copied to the GPU (pageable, so each copy waits) twice a block, some 7 GB a step on one "
      "GPU; its attention runs FlashAttention's varlen kernel with the prompt's padding apart; and its sequence-parallel path "
      "reads a token count back to the host six times a block. "
      % ("{:,}".format(mask_rows), mask_rows * host_s, vae_s, vae["h20"], vae_diffusers, abs(100 * hunyuan_recent_error), encoders["h100"],
         100 * video_worst, spct(video_errors["h100", 8]), spct(diffusers_error), vae_s + encoders["h100"],
         row_host[10][0], spct(row_host[10][1]), row_host[20][0], spct(row_host[20][1])))
    w("Steps alone, the 8-GPU speed-up on H100s is overstated. On H20s, whose step takes three and a "
      "half times an H100's in xDiT's table, the same serial part is a smaller share, and the model's speed-ups are within "
      "%.1f%% of xDiT's at 2, 4 and 8 GPUs. One H20 takes %.0f s for the steps where xDiT took 6,639 s for the whole video (%s). xDiT's run reached "
      "about 60%% of the H20's tensor peak against a third of the H100's (600 PFLOP a video by the model's count): the "
      "H20's SMs do a quarter of an H100's tensor work (148 against 989 TFLOP/s, partner sheets' figures, approx.) while "
      "the time an H100 loses beside its tensor cores (softmax, epilogues, stalls) stays, so the model carries Hopper's "
      "shares of peak, fitted on the H100, to the H20 as that lost time (compute.md, the kernel-time model). Before it "
      "did (2026-12-03), the H100's shares applied to the H20's peak gave 10,596 s (+59.6%%). Nothing was fitted to these "
      "rows, but they, and the FLUX.1-dev row on an H20 above, were known when that was written; the H20's constants stay "
      "a guess (no H20 kernel was measured), and fleetsim says so wherever it times work on one.\n"
      % (100 * h20_worst, times["h20", 1], spct(times["h20", 1] / xdit["h20"][1] - 1)))

    pipefusion_section(w, args)

    w("## Where the model is weakest\n")
    w("- Kernels of a few rows (m <= 64): their time is a few microseconds of fixed cost and one CTA's pace per row, which "
      "the model holds constant per class; real kernels vary with their launch configuration. The worst rows above are of "
      "this kind (residual adds of 1-8 tokens).")
    w("- GPUs other than the ones the constants were fitted on (the H100, the A100, the L40S): their shares of peak are "
      "carried over as time lost beside the tensor cores that stays as it was, an assumption checked only on whole "
      "images and videos (an H20: -8% and -1%; an RTX 4090: +17%), not on any kernel.")
    w("- Medium GEMMs (64 < m <= 512 tokens, 7-10% median): where cuBLAS changes kernel (tile shape, split-K). Its "
      "heuristics are not public; the model takes the fastest of its candidates, which the real pick is not always.")
    w("- The L2 term (the share of a memory-bound kernel's bytes that fits in the L2 cache moves faster) is a smooth "
      "stand-in for a sharp effect.")
    w("- Convolutions run at the GEMM tiles' efficiency as implicit GEMMs. Measured on an H200 with PyTorch 2.11 and "
      "cuDNN 9.19 ([gpu-validation.md](gpu-validation.md)): HunyuanVideo's 3x3x3 decoder convolutions take 5-23% longer "
      "than that GEMM, GroupNorm over a whole clip matches the model (6.59 ms measured, 6.63 ms modelled at "
      "512 channels, 33 x 90 x 160), and its replicate pads move 0.5 TB/s, six times slower than a plain copy: a class of "
      "their own since 2026-12-04 (`indexed-copy`, fitted to those three rows), which made the decode some 18% slower. "
      "None of which makes the two and a half times by which the two older published HunyuanVideo decodes exceed the model. SDXL's NCHW 3x3 convolutions: the model's transposes of the input, the "
      "output and the filter (cuDNN reorders an NCHW filter on every call) and its GEMM give 147 us at 320 channels and "
      "128 x 128 (measured 146-149), 135 us at 640 and 64 x 64 (143-147) and 139 us at 1,280 and 32 x 32 (174-179: the "
      "filter's 29 MB are most of the transposes there); before the filter's transpose was counted, 145, 127 and 112 us. "
      "Channels-last they run as fast as the GEMM. Published cuDNN 3x3x3 figures on an A100 sit near the GEMM class's "
      "share (above). The NCHW transposes eager PyTorch adds around them are modelled as copies. One lead, not modelled: "
      "the PyTorch release a run used decides which code a 3D convolution runs. PyTorch 2.9.0 turned cuDNN off for "
      "half-precision 3D convolutions with kernels larger than 1 on cuDNN 9.8 and later (pytorch/pytorch pull request "
      "163581, a workaround for a wrong-result bug), so they fall back to vol2col and a GEMM, and 2.9.1 turns it back on "
      "where cuDNN 9.15 or later is installed (nvidia-cosmos/cosmos-transfer2.5 pull request 227: 2.9.0's fallback took "
      "about 17 times the memory). SGLang measured its LTX-2 decode on two H100s at 1,585 ms before and 925 ms after "
      "moving its 3D convolutions' weights to channels_last_3d, which took them off `slow_conv_dilated3d` and onto cuDNN "
      "(sgl-project/sglang pull request 23200, read as a search excerpt). The published HunyuanVideo decodes do not say "
      "which PyTorch they ran; with cuDNN's 3D convolutions (as measured here) the kernels do not explain the gap.")
    w("- GroupNorm's statistics (one CTA per sample and group) take a per-CTA pace derived from four published eager "
      "GroupNorm+SiLU timings on Hopper (sglang pull requests 26045 and 23938; see `models/kernels.json`); Ampere takes the "
      "same pace, a guess.")
    w("- The host's 29 us per eager launch is fitted to one host-bound case (SD 1.5 in diffusers on A100) and taken for "
      "ComfyUI too; it decides small steps (text encoders, SD 1.5, SDXL on H100) and hardly matters for large ones. A "
      "faster host CPU, or PyTorch with less dispatch overhead, lowers it. Kernels a library launches inside one call "
      "(cuDNN's transposes) count as launches, which the fit absorbs; counting calls instead (40 us a call) was tried "
      "and not kept (`models/kernels.json`, host, says how it moved the checks).")
    w("- Eager op lists are read from ComfyUI's and diffusers' code (`models/runtimes.json`), not from a profiler trace: "
      "where a count rests on PyTorch internals (RMSNorm a composite before PyTorch 2.9, cuDNN's layout transposes "
      "around each NCHW convolution) the entry says so. Broadcast and strided elementwise kernels on Hopper are fitted to "
      "one eager RMSNorm chain on an H100 (1.57 TB/s); Ampere's are scaled from it (a guess). On the H200 they moved 1.6 TB/s "
      "(measured here, and sglang's 1.5), not the 2.2 the model's share of its faster HBM gives: their pace looks bound "
      "by the SMs rather than by memory.")
    w("- Attention: PyTorch 2.11 runs `scaled_dot_product_attention` on an H200 with cuDNN's kernel by default, 1.75-2 "
      "times FlashAttention-2 (1.3% off the model's FlashAttention-2 constants forced at FLUX's shape). PyTorch puts cuDNN "
      "first on sm90 and sm100 where its cuDNN is newer than 9.15, as the 2.11 wheels' is (`check_prefer_cudnn_attention`; "
      "huggingface/transformers pull request 48163); before, FlashAttention-2 (2.5.0 briefly preferred cuDNN; pytorch/pytorch "
      "pull request 138522). A model step takes either (`\"attention\": \"flash2\"` or `\"cudnn\"` in its work, `--attention` "
      "for `fleetsim kernels`); FlashAttention-2 stays the default, as the runtimes' sources read PyTorch up to 2.8. Hopper's "
      "cuDNN constants are fitted to cudnn-frontend's H200 benchmark (head dimension 128 only: head dimension 64 borrows "
      "FlashAttention-2's per-key softmax work); not fitted to, FLUX's attention through PyTorch on an H100 is -1.0%, "
      "PyTorch 2.11 on the H200 at FLUX's shapes -7% to -11%, and causal attention with 8 heads (a TP-8 Llama 3 70B "
      "prefill) -3% to -11%. On an H20 cuDNN is +15% to +22% (the share carried to its cut tensor cores is too low "
      "there) while FlashAttention-2 is within 7%. Other architectures have no cuDNN constants and say so.")
    w("- Causal attention's query blocks are timed as the GPU dispatches them (each head's blocks in order, their keys "
      "growing, to the first SM that frees): where a few heads fill only a few waves, the longest blocks start last and "
      "the kernel waits for them. Timed by their average instead, the model was 19-35% fast on PyTorch 2.11's cuDNN "
      "causal attention with 8 heads on the H200 (now -3% to -11%) and 29% fast on FlashAttention-2 forced there (now "
      "-10%); the H20's causal FlashAttention-2 row moved from -15% to -7%. The FlashAttention-2 constants were not "
      "refitted for it (their in-sample median 6.1%, 4.0% refitted, which would move every diffusion step).")
    w("- Attention on A100: fitted to forward and backward passes timed together, so its forward level rests on the "
      "backward's rate measured on another Ampere GPU (an RTX A5000; `models/kernels.json`). Every constant for Volta, "
      "Ada and Blackwell GPUs: no measurement of them was fitted; `fleetsim kernels` says so where it applies them.\n")

    w("## Square GEMMs on every catalog GPU\n")
    w("`fleetsim kernels --gpu GPU --gemm N,N,N` (bf16): achieved TFLOP/s and the share of the dense peak.\n")
    catalog = json.loads(subprocess.run([args.fleetsim, "catalog", "--json"], check=True, capture_output=True, text=True, cwd=ROOT).stdout)
    sizes = (512, 2048, 8192)
    w("| GPU | architecture | " + " | ".join("N = %d" % n for n in sizes) + " |")
    w("|---|---|" + "---:|" * len(sizes))
    for gid, g in catalog["gpus"].items():
        if "bf16" not in g["peak_flop_per_s"]:
            continue
        cells = []
        for n in sizes:
            e = fleetsim(args.fleetsim, "kernels", "--gpu", gid, "--gemm", "%d,%d,%d" % (n, n, n))
            tf = 2 * n ** 3 / e["time_s"] / 1e12
            cells.append("%.0f (%.0f%%)" % (tf, 100 * tf * 1e12 / g["peak_flop_per_s"]["bf16"]))
        w("| %s | %s | %s |" % (gid, g["arch"], " | ".join(cells)))
    w("")
    with open(args.out, "w") as f:
        f.write("\n".join(out))
    print("wrote", args.out)


if __name__ == "__main__":
    sys.exit(main())
