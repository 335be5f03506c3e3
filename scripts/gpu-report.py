#!/usr/bin/env python3
"""The kernel-time model against kernels measured on a GPU (scripts/gpu-kernel-probe.py's files), as the Markdown
tables of reports/gpu-validation.md.

Usage: python3 scripts/gpu-report.py [FLEETSIM (build/fleetsim)] [DIR (reports/gpu)] [PREFIX (h200)] [GPU (h200-sxm)]
Reads DIR/PREFIX-kernels-{bf16,fp32}[-cold].csv and DIR/PREFIX-probe.json (an empty PREFIX: the probe's own names,
kernels-bf16.csv and probe.json); prints to stdout.
"""
import json
import os
import statistics
import subprocess
import sys

fleetsim = sys.argv[1] if len(sys.argv) > 1 else "build/fleetsim"
folder = sys.argv[2] if len(sys.argv) > 2 else "reports/gpu"
prefix = sys.argv[3] if len(sys.argv) > 3 else "h200"
gpu = sys.argv[4] if len(sys.argv) > 4 else "h200-sxm"


def named(base):
    return os.path.join(folder, "%s-%s" % (prefix, base) if prefix else base)


def predicted(dtype, cold):
    path = named("kernels-%s%s.csv" % (dtype, "-cold" if cold else ""))
    out = subprocess.run([fleetsim, "kernels", "--gpu", gpu, "--dtype", dtype, "--measured", path, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return {r["name"]: r for r in json.loads(out)["rows"]}


def gemm_us(m, n, k):
    out = subprocess.run([fleetsim, "kernels", "--gpu", gpu, "--gemm", "%d,%d,%d" % (m, n, k), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["time_s"] * 1e6


def pct(x):
    return "%+.0f%%" % (100 * x)


def shape(r):
    if r["kernel"].startswith("attention"):
        return "%d heads x %d tokens, d %d" % (r.get("batch", 1), r["m"], r["k"])
    if r["kernel"] == "gemm":
        return "%d x %d x %d" % (r["m"], r["n"], r["k"])
    return "%d x %d" % (r["m"], r["n"])


def table(title, header, align):
    """A Markdown table's opening: its title (if any) and a blank line, the header, the alignment row."""
    if title:
        print(title)
        print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")


probe = json.load(open(named("probe.json")))
batch = {r["name"]: r["batch"] for r in probe["rows"]}
errors = {}
table(None, ["kernel", "class", "dtype", "shape", "measured", "model", "error", "measured cold", "error cold", "model's bound"], "llllrrrrrl")
for dtype in ("bf16", "fp32"):
    warm, cold = predicted(dtype, False), predicted(dtype, True)
    for name, r in warm.items():
        r["batch"] = batch.get(name, 1)
        e = r["time_s"] / r["measured_s"] - 1
        errors.setdefault(r["kernel"].replace("-causal", ""), []).append(e)
        c = cold.get(name)
        ce = c["time_s"] / c["measured_s"] - 1 if c else None
        print("| %s | %s | %s | %s | %.1f us | %.1f us | %s | %s | %s | %s |" % (
            name, r["kernel"], dtype, shape(r), r["measured_s"] * 1e6, r["time_s"] * 1e6, pct(e),
            "%.1f us" % (c["measured_s"] * 1e6) if c else "", pct(ce) if c else "",
            "memory" if r["memory_bound"] else "compute"))
print()
table(None, ["class", "kernels", "median error", "median abs error", "range"], "lrrrl")
for cls, es in sorted(errors.items()):
    print("| %s | %d | %s | %.0f%% | %s to %s |" % (cls, len(es), pct(statistics.median(es)),
                                                   100 * statistics.median(abs(e) for e in es), pct(min(es)), pct(max(es))))
print()

extras = {x["name"]: x for x in probe["extras"]}
table("Convolutions (cuDNN through `F.conv2d` / `F.conv3d`), against the model's GEMM of the same M, N, K (bf16):",
      ["convolution", "layout", "dtype", "measured", "TFLOP/s", "model (GEMM M x N x K)"], "lllrrr")
for name, x in extras.items():
    if not name.startswith(("sdxl.conv3x3", "hunyuan.vae.conv3d")):
        continue
    parts = name.split(".")
    layout = parts[-2] if name.startswith("sdxl") else "ncdhw"
    dt = parts[-1] if name.startswith("sdxl") else "bf16"
    print("| %s | %s | %s | %.0f us | %.0f | %.0f us (%d x %d x %d) |" % (
        ".".join(parts[:-2]) if name.startswith("sdxl") else name, layout, dt, x["time_us"], x["TFLOPs"],
        gemm_us(x["m"], x["n"], x["k"]), x["m"], x["n"], x["k"]))
print()
table("Memory-bound kernels with no class of their own in the measured-kernel files:", ["kernel", "measured", "achieved"], "lrr")
for name, x in extras.items():
    if name.startswith("hunyuan.vae.conv3d"):
        print("| %s: replicate pad | %.0f us | %.2f TB/s |" % (name, x["pad_us"], x["pad_TBps"]))
        print("| %s: GroupNorm (32 groups, 1 sample) | %.0f us | %.2f TB/s |" % (name, x["groupnorm_us"], x["groupnorm_TBps"]))
    elif "TBps" in x and "time_us" in x:
        print("| %s (%s) | %.1f us | %.2f TB/s |" % (name, x["what"], x["time_us"], x["TBps"]))
print()
table("Attention backends (`torch.nn.attention.sdpa_kernel`), the default being PyTorch's own choice:",
      ["case", "default", "flash (FA2)", "cuDNN", "memory-efficient"], "llrrr")
for name, x in extras.items():
    if not name.startswith("sdpa.backends"):
        continue
    cell = lambda b: "%.0f us (%.0f TFLOP/s)" % (x[b]["time_us"], x[b]["TFLOPs"]) if isinstance(x.get(b), dict) else str(x.get(b))  # noqa: E731
    print("| %s | %s | %s | %s | %s |" % (name, x["default"], cell("FLASH_ATTENTION"), cell("CUDNN_ATTENTION"), cell("EFFICIENT_ATTENTION")))
print()
table("Launches and the host:", ["what", "per op"], "lr")
for name, x in extras.items():
    if name.startswith("launch."):
        value = x.get("per_op_us", x.get("per_kernel_us"))
        print("| %s: %s | %.2f us |" % (name, x["what"], value))
print()
table("GEMMs of 4096^3 back to back (TFLOP/s per window of 16), from an idle start:",
      ["operands", "first window", "highest", "lowest", "last window", "span"], "lrrrrr")
for name, x in extras.items():
    if name.startswith("sustained."):
        w = x["window_TFLOPs"]
        print("| %s | %.0f | %.0f | %.0f | %.0f | %.0f ms |" % (name.replace("sustained.gemm4096.", ""), w[0], max(w), min(w), w[-1], x["span_ms"]))
print()
for name in ("ceiling.copy", "ceiling.matmul"):
    if name in extras:
        x = extras[name]
        print("- %s (%s): %s" % (name, x["what"], ", ".join("%s %s" % (k, round(v, 2) if isinstance(v, float) else v)
                                                          for k, v in x.items() if k not in ("name", "what"))))
