#!/usr/bin/env python3
"""Fits the "achieved" section of models/nccl.json to the NCCL measurements in calibrate/data/vidur.

NCCL picks an algorithm and protocol by its own cost model; fleetsim keeps that choice and scales
what it achieves: per protocol, the per-step latency (latency_scale) and the bandwidth
(bandwidth_scale), and the small_gang loss of 2 and 4 GPUs against 8; for point-to-point, a latency
and a bandwidth scale per link class. This script finds those numbers by least squares on the log of
predicted over measured time (a robust soft-L1 loss, so a few noisy rows do not pull the fit), running
`fleetsim collective --measured` itself with candidate constants (--nccl), so the fit and the model
are one code. Standard library only.

    python3 scripts/fit-collectives.py [--fleetsim build/fleetsim] [--write]

Prints the fitted numbers and each configuration's median |error|; --write puts them into
models/nccl.json (rebuild afterwards: the file is compiled in).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "calibrate", "data", "vidur")
CLUSTERS = os.path.join(DATA, "clusters")

# (architecture, measured file, collective, GPUs, cluster): the single-node runs the corrections are for.
ALL_REDUCE = [
    ("ampere", "a100_dgx_all_reduce_2gpus_2pernode.csv", 2, "hgx-a100-8"),
    ("ampere", "a100_dgx_all_reduce_4gpus_4pernode.csv", 4, "hgx-a100-8"),
    ("ampere", "a100_dgx_all_reduce_8gpus_8pernode.csv", 8, "hgx-a100-8"),
    ("hopper", "h100_dgx_all_reduce_2gpus_2pernode.csv", 2, os.path.join(CLUSTERS, "h100-nvls-off.json")),
    ("hopper", "h100_dgx_all_reduce_4gpus_4pernode.csv", 4, os.path.join(CLUSTERS, "h100-nvls-off.json")),
    ("hopper", "h100_dgx_all_reduce_8gpus_8pernode.csv", 8, os.path.join(CLUSTERS, "h100-nvls-off.json")),
]
SEND_RECV = [  # (architecture, link class, file, cluster)
    ("ampere", "nvlink", "a100_dgx_send_recv_2gpus_2pernode.csv", "hgx-a100-8"),
    ("hopper", "nvlink", "h100_dgx_send_recv_2gpus_2pernode.csv", os.path.join(CLUSTERS, "h100-nvls-off.json")),
    ("hopper", "net", "h100_dgx_send_recv_2gpus_1pernode.csv", os.path.join(CLUSTERS, "h100-2x1.json")),
]


def run(fleetsim, constants, op, gpus, cluster, measured):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(constants, f)
        path = f.name
    try:
        out = subprocess.run([fleetsim, "collective", "--op", op, "--gpus", str(gpus), "--cluster", cluster,
                              "--measured", os.path.join(DATA, measured), "--nccl", path, "--json"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    doc = json.loads(out)
    return [math.log(p["time_s"] / p["measured_s"]) for p in doc["points"]], doc["measured"]["median_abs_error"]


def soft_l1(residuals, scale=0.05):
    return sum(2 * (math.sqrt(1 + (r / scale) ** 2) - 1) for r in residuals) / len(residuals)


def nelder_mead(f, x0, step=0.2, iterations=400, tolerance=1e-7):
    """Minimises f from x0 (a list); plain Nelder-Mead with the usual coefficients."""
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (step if j == i else 0) for j in range(n)] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tolerance * (abs(values[0]) + 1e-12):
            break
        centroid = [sum(p[j] for p in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflected = [centroid[j] + (centroid[j] - worst[j]) for j in range(n)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [centroid[j] + 2 * (centroid[j] - worst[j]) for j in range(n)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [centroid[j] + 0.5 * (worst[j] - centroid[j]) for j in range(n)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[best[j] + 0.5 * (p[j] - best[j]) for j in range(n)] for p in simplex[1:]]
                values = [values[0]] + [f(p) for p in simplex[1:]]
    i = min(range(n + 1), key=lambda i: values[i])
    return simplex[i], values[i]


def fit_collectives(fleetsim, base, arch):
    """latency_scale (3), bandwidth_scale (3) and small_gang, in log space except small_gang."""
    runs = [r for r in ALL_REDUCE if r[0] == arch]

    def constants_for(x):
        k = json.loads(json.dumps(base))
        a = k["achieved"][arch]
        a["latency_scale"] = [round(math.exp(v), 4) for v in x[0:3]]
        a["bandwidth_scale"] = [round(math.exp(v), 4) for v in x[3:6]]
        a["small_gang"] = round(min(max(x[6], 0.0), 7.9), 4)
        return k

    def loss(x):
        residuals = []
        for _, measured, gpus, cluster in runs:
            residuals += run(fleetsim, constants_for(x), "all-reduce", gpus, cluster, measured)[0]
        return soft_l1(residuals)

    a = base["achieved"][arch]
    x0 = [math.log(v) for v in a["latency_scale"]] + [math.log(v) for v in a["bandwidth_scale"]] + [a["small_gang"]]
    x, value = nelder_mead(loss, x0)
    return constants_for(x)["achieved"][arch], value


def fit_p2p(fleetsim, base, arch, link, measured, cluster):
    def constants_for(x):
        k = json.loads(json.dumps(base))
        for key in ("ampere", "hopper", "default") if link == "net" else (arch,):
            k["achieved"][key]["p2p_latency_us"][link] = round(math.exp(x[0]), 3)
            k["achieved"][key]["p2p_bandwidth_scale"][link] = round(math.exp(x[1]), 4)
        return k

    def loss(x):
        return soft_l1(run(fleetsim, constants_for(x), "send-recv", 2, cluster, measured)[0])

    a = base["achieved"][arch]
    x, value = nelder_mead(loss, [math.log(a["p2p_latency_us"][link]), math.log(a["p2p_bandwidth_scale"][link])])
    return constants_for(x), value


def write_back(path, fitted):
    """Replaces the fitted numbers in models/nccl.json, keeping its layout."""
    text = open(path).read()
    start = text.index('"achieved"')
    head, tail = text[:start], text[start:]
    for arch, a in fitted.items():
        block_start = tail.index('"%s": {' % arch)
        block_end = tail.index("}\n", tail.index('"p2p_bandwidth_scale"', block_start)) + 1
        block = tail[block_start:block_end]
        block = re.sub(r'"small_gang": [0-9.e+-]+', '"small_gang": %g' % a["small_gang"], block)
        for key in ("latency_scale", "bandwidth_scale"):
            block = re.sub(r'"%s": \[[^\]]*\]' % key, '"%s": [%s]' % (key, ", ".join("%g" % v for v in a[key])), block)
        for key in ("p2p_latency_us", "p2p_bandwidth_scale"):
            block = re.sub(r'"%s": \{[^}]*\}' % key,
                           '"%s": {%s}' % (key, ", ".join('"%s": %g' % (c, a[key][c]) for c in ("nvlink", "pcie", "net"))), block)
        tail = tail[:block_start] + block + tail[block_end:]
    open(path, "w").write(head + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fleetsim", default=os.path.join(ROOT, "build", "fleetsim"))
    parser.add_argument("--write", action="store_true", help="write the fitted numbers into models/nccl.json")
    args = parser.parse_args()
    models = os.path.join(ROOT, "models", "nccl.json")
    base = json.load(open(models))
    fitted = {}
    for arch in ("ampere", "hopper"):
        fitted[arch], value = fit_collectives(args.fleetsim, base, arch)
        base["achieved"][arch] = fitted[arch]
        print("%s all-reduce: latency_scale %s bandwidth_scale %s small_gang %g (loss %.5f)" %
              (arch, fitted[arch]["latency_scale"], fitted[arch]["bandwidth_scale"], fitted[arch]["small_gang"], value))
    for arch, link, measured, cluster in SEND_RECV:
        base, value = fit_p2p(args.fleetsim, base, arch, link, measured, cluster)
        print("%s send/recv over %s: latency %g us, bandwidth scale %g (loss %.5f)" %
              (arch, link, base["achieved"][arch]["p2p_latency_us"][link], base["achieved"][arch]["p2p_bandwidth_scale"][link], value))
    fitted = {arch: base["achieved"][arch] for arch in ("ampere", "hopper", "default")}
    for arch, measured, gpus, cluster in ALL_REDUCE:
        print("  %-44s median |error| %.1f%%" % (measured, 100 * run(args.fleetsim, base, "all-reduce", gpus, cluster, measured)[1]))
    for arch, link, measured, cluster in SEND_RECV:
        print("  %-44s median |error| %.1f%%" % (measured, 100 * run(args.fleetsim, base, "send-recv", 2, cluster, measured)[1]))
    if args.write:
        write_back(models, fitted)
        print("wrote", models)


if __name__ == "__main__":
    sys.exit(main())
