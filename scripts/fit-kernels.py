#!/usr/bin/env python3
"""Fits the A100 and H100 sections of models/kernels.json to Vidur's per-operation profiles, their
attention constants to published FlashAttention-2 and SDPA timings, and Hopper's cuDNN attention to cuDNN's
published H200 timings.

    python3 scripts/fit-kernels.py [--fleetsim build/fleetsim] [--write]

Runs `fleetsim kernels --gpu G --measured FILE --fit OUT` (the fit is fleetsim's own, fit_kernel_constants)
on calibrate/data/vidur/compute/G.csv and calibrate/data/attention/{a100_fa2_fwd_bwd,h100_fa2_sdpa,h200_cudnn}.csv, and prints
the fitted figures; --write puts the numbers into models/kernels.json, keeping its sources and layout
(rebuild afterwards: the file is compiled in). Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FITS = [  # (architecture, GPU type, Vidur's set, attention set)
    ("ampere", "a100-sxm-80gb", "calibrate/data/vidur/compute/a100.csv", "calibrate/data/attention/a100_fa2_fwd_bwd.csv"),
    ("hopper", "h100-sxm", "calibrate/data/vidur/compute/h100.csv", "calibrate/data/attention/h100_fa2_sdpa.csv"),
]
ATTENTION = ("attention_efficiency", "attention_key_overhead", "attention_head_overhead")
BACKWARD = ("attention_backward_rate", "attention_backward_rate_causal")  # fitted where a set times both passes
BORROW_AMPERE = ("ada", "default")  # sections whose attention is Ampere's (models/kernels.json says so in each)
CUDNN = ("hopper", "h200-sxm", "calibrate/data/attention/h200_cudnn.csv", "bf16")  # cuDNN's attention: its own constants


def fit(fleetsim, gpu, data, dtype="fp16"):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fit.json")
        report = subprocess.run([fleetsim, "kernels", "--gpu", gpu, "--dtype", dtype, "--measured", data, "--fit", out],
                                check=True, capture_output=True, text=True, cwd=ROOT).stdout
        return json.load(open(out)), report


def round_all(x):
    if isinstance(x, float):
        return float("%.4g" % x)
    if isinstance(x, list):
        return [round_all(v) for v in x]
    if isinstance(x, dict):
        return {k: round_all(v) for k, v in x.items()}
    return x


def scaled_from_hopper(path, memory_bound):
    """The classes set by hand on Hopper (broadcast, indexed-copy) at Hopper's share of its activation efficiency
    (their other figures as they were), so that a refit activation class carries them along."""
    hopper = json.load(open(path))["architectures"]["hopper"]["memory_bound"]
    out = {}
    for cls in ("broadcast", "indexed-copy"):
        out[cls] = dict(memory_bound[cls])
        share = hopper[cls]["efficiency"] / hopper["activation"]["efficiency"]
        out[cls]["efficiency"] = round_all(memory_bound["activation"]["efficiency"] * share)
    return out


def write_back(path, arch, section):
    """Replaces the numbers of one architecture's section, keeping its source and the file's layout."""
    text = open(path).read()
    start = text.index('"%s": {' % arch, text.index('"architectures"'))
    end = text.index('"attention_fixed_us"', start)
    block = text[start:end]
    block = re.sub(r'"gemm_tile_efficiency": \[[^\]]*\]', '"gemm_tile_efficiency": %s' % json.dumps(section["gemm_tile_efficiency"]), block)
    for key in ("gemm_k_overhead", "gemm_memory_efficiency", "gemm_fixed_us"):
        block = re.sub(r'"%s": [0-9.e+-]+' % key, '"%s": %s' % (key, json.dumps(section[key])), block)
    for cls, m in section["memory_bound"].items():
        block = re.sub(r'"%s": \{[^}]*\}' % re.escape(cls), '"%s": %s' % (cls, json.dumps(m)), block)
    block = attention_numbers(block, section)
    open(path, "w").write(text[:start] + block + text[end:])


def attention_numbers(block, section):
    for key in [k for k in ATTENTION + BACKWARD if k in section]:
        block = re.sub(r'"%s": [0-9.e+-]+' % key, '"%s": %s' % (key, json.dumps(section[key])), block)
    return block


def write_borrowed_attention(path, arch, section):
    """Gives an architecture that borrows Ampere's constants (its source says so) Ampere's fitted attention."""
    text = open(path).read()
    start = text.index('"%s": {' % arch, text.index('"architectures"'))
    end = text.index('"attention_fixed_us"', start)
    open(path, "w").write(text[:start] + attention_numbers(text[start:end], section) + text[end:])


def write_cudnn(path, arch, cudnn):
    """Replaces the numbers of one architecture's cudnn_attention object, keeping its source."""
    text = open(path).read()
    start = text.index('"cudnn_attention": {', text.index('"%s": {' % arch, text.index('"architectures"')))
    end = text.index("}", start)
    block = text[start:end]
    for key in ("efficiency", "key_overhead", "head_overhead"):
        block = re.sub(r'"%s": [0-9.e+-]+' % key, '"%s": %s' % (key, json.dumps(cudnn[key])), block)
    open(path, "w").write(text[:start] + block + text[end:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fleetsim", default=os.path.join(ROOT, "build", "fleetsim"))
    parser.add_argument("--write", action="store_true", help="write the fitted numbers into models/kernels.json")
    args = parser.parse_args()
    models = os.path.join(ROOT, "models", "kernels.json")
    for arch, gpu, data, attention in FITS:
        fitted, report = fit(args.fleetsim, gpu, data)
        section = round_all(fitted["architectures"][arch])
        if attention:
            fitted_attention, attention_report = fit(args.fleetsim, gpu, attention)
            for key in ATTENTION + BACKWARD:
                if key in fitted_attention["architectures"][arch]:
                    section[key] = round_all(fitted_attention["architectures"][arch][key])
            report += attention_report
        # Classes the profiles do not measure take the activation figures, as the file's source says;
        # GroupNorm's statistics (reduction) keep the figures derived in the file's source.
        for cls in ("softmax", "embedding", "memory"):
            section["memory_bound"][cls] = section["memory_bound"]["activation"]
        del section["memory_bound"]["reduction"]
        if arch != "hopper":  # broadcast and indexed copies: Hopper's shares of its activation class, as the source says
            section["memory_bound"].update(scaled_from_hopper(models, section["memory_bound"]))
        print("%s (%s):" % (arch, gpu))
        print("  gemm tiles %s, k overhead %s, memory efficiency %s, fixed %s us" %
              (section["gemm_tile_efficiency"], section["gemm_k_overhead"], section["gemm_memory_efficiency"], section["gemm_fixed_us"]))
        print("  attention %s" % ", ".join("%s %s" % (k, section[k]) for k in ATTENTION + BACKWARD if k in section))
        for cls, m in section["memory_bound"].items():
            print("  %-17s %s" % (cls, m))
        print("\n".join("  " + line for line in report.splitlines() if line and not line.startswith("#")))
        if args.write:
            write_back(models, arch, section)
            if arch == "ampere":
                for borrower in BORROW_AMPERE:
                    write_borrowed_attention(models, borrower, section)
    arch, gpu, data, dtype = CUDNN
    fitted, report = fit(args.fleetsim, gpu, data, dtype)
    cudnn = round_all(fitted["architectures"][arch]["cudnn_attention"])
    print("%s cuDNN attention (%s): %s" % (arch, gpu, ", ".join("%s %s" % (k, v) for k, v in cudnn.items() if k != "source")))
    print("\n".join("  " + line for line in report.splitlines() if line and not line.startswith("#")))
    if args.write:
        write_cudnn(models, arch, cudnn)
        print("wrote", models)


if __name__ == "__main__":
    sys.exit(main())
