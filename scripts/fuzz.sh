#!/usr/bin/env bash
# Builds the loaders' libFuzzer target with clang and runs it for a bounded time (default 60 s)
# from a seed corpus of the shipped scenarios, workflows and catalog.
# Usage: bash scripts/fuzz.sh [SECONDS] [BUILD_DIR]
# BUILD_DIR: a build already configured with clang and -DFLEETSIM_FUZZ=ON (CI's sanitizer build is one), whose
# objects the target reuses; without it, build-fuzz is configured for the fuzz target alone.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${2:-}
if [ -z "$build" ]; then
  command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
  build=build-fuzz
  CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLEETSIM_FUZZ=ON \
    -DFLEETSIM_TESTS=OFF -DFLEETSIM_BENCH=OFF -DFLEETSIM_CUDA=OFF >/dev/null
elif ! grep -q '^FLEETSIM_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz: $build is not a build configured with -DFLEETSIM_FUZZ=ON" >&2
  exit 1
fi
cmake --build "$build" --target fuzz_loaders -j"$(nproc)"

# Seed corpus: each file prefixed with the byte that picks its loader (0 scenario, 1 workflow, 2 catalog, 3 units,
# 4 calibration profile, 5 nccl-tests log, 6 training job, 7 plan, 8 ComfyUI graph, 9 WfCommons instance, 10 job trace CSV,
# 11 a rank's report of measured times, 12 NCCL model constants, 13 measured collective times, 14 kernel-model
# constants, 15 measured kernel times, 16 Philly's job log, 17 a cluster job log in CSV, 18 a --set edit, 19 a ComfyUI
# registry file, 20 a gittins job-size history, 21 a serving deployment, 22 a serving request trace CSV).
corpus=$build/corpus
rm -rf "$corpus" && mkdir -p "$corpus"
i=0
for f in scenarios/*.json scenarios/studies/*.json; do { printf '\x00'; cat "$f"; } >"$corpus/s$i"; i=$((i + 1)); done
for f in scenarios/workflows/*.json; do { printf '\x01'; cat "$f"; } >"$corpus/w$i"; i=$((i + 1)); done
for f in models/*.json tests/data/*.json; do { printf '\x02'; cat "$f"; } >"$corpus/c$i"; i=$((i + 1)); done
{ printf '\x04'; echo '{"fleetsim_profile": 1, "provenance": {"backend": "cpu"}, "gpus": {"cpu-core": {"peak_flops": {"fp32": "40 GFLOP/s"}, "memory_bandwidth": "30 GB/s", "shared_memory_bandwidth": "40 GB/s", "compute_pool": 1.5}}, "links": {"host-memcpy": {"bandwidth": "15 GB/s", "latency": "1 us"}}, "measurements": [{"kernel": "gemm", "dtype": "fp32", "size": 1e9, "seconds": 0.025}]}'; } >"$corpus/p$i"
i=$((i + 1))
for f in tests/data/nccl-tests/*.log; do { printf '\x05'; cat "$f"; } >"$corpus/n$i"; i=$((i + 1)); done
for f in scenarios/training/*.json; do { printf '\x06'; cat "$f"; } >"$corpus/t$i"; i=$((i + 1)); done
for f in scenarios/plans/*.json; do { printf '\x07'; cat "$f"; } >"$corpus/l$i"; i=$((i + 1)); done
for f in scenarios/comfyui/*.json tests/data/comfyui/*.json tests/data/comfyui-corpus/*.json; do { printf '\x08'; cat "$f"; } >"$corpus/g$i"; i=$((i + 1)); done
for f in scenarios/wfcommons/*.json; do { printf '\x09'; cat "$f"; } >"$corpus/f$i"; i=$((i + 1)); done
for f in scenarios/traces/*.csv tests/data/*.csv; do { printf '\x0a'; cat "$f"; } >"$corpus/j$i"; i=$((i + 1)); done
# A rank's report: one member's times and failure, one weight load (tests/ranks_test.cpp has its layout).
python3 -c "
import struct, sys
out = struct.pack('<Q', 1) + struct.pack('<II', 7, 1) + struct.pack('<4d', 0.5, 0.75, 1.0, 1.25) + struct.pack('<Q', 4) + b'oops'
out += struct.pack('<Q', 1) + struct.pack('<I', 3) + struct.pack('<2d', 0.5, 0.625)
sys.stdout.buffer.write(b'\x0b' + out)" >"$corpus/r$i"
i=$((i + 1))
{ printf '\x0c'; cat models/nccl.json; } >"$corpus/k$i"
i=$((i + 1))
for f in calibrate/data/vidur/h100_dgx_send_recv_2gpus_1pernode.csv tests/data/nccl-tests/*.log; do { printf '\x0d'; cat "$f"; } >"$corpus/m$i"; i=$((i + 1)); done
for f in scenarios/serving/*.json; do { printf '\x15'; cat "$f"; } >"$corpus/v$i"; i=$((i + 1)); done
for f in scenarios/serving/*.csv; do { printf '\x16'; cat "$f"; } >"$corpus/q$i"; i=$((i + 1)); done
{ printf '\x0e'; cat models/kernels.json; } >"$corpus/x$i"
i=$((i + 1))
for f in calibrate/data/vidur/compute/*.csv calibrate/data/attention/*.csv; do { printf '\x0f'; cat "$f"; } >"$corpus/v$i"; i=$((i + 1)); done
{ printf '\x10'; cat tests/data/philly-sample.json; } >"$corpus/y$i"
i=$((i + 1))
for f in tests/data/job-logs/*.csv; do { printf '\x11'; cat "$f"; } >"$corpus/z$i"; i=$((i + 1)); done
for e in '/tenants/1={"name": "b"}' '/tenants/-={"name": "c"}' '/cluster/nodes/0/count=2' '/seed=5' '/horizon=1 h' '/cluster/fabric/topology=fat-tree'; do
  printf '\x12%s' "$e" >"$corpus/e$i"; i=$((i + 1))
done
{ printf '\x13'; echo '{"families": {"f": {"label": "F", "diffusion": {"architecture": "sdxl-unet", "model": "sdxl-base-1.0"}}}, "files": [{"contains": ["^m."], "family": "f"}], "nodes": {"Custom": {"role": "upscale", "widgets": ["a"], "outputs": ["image"]}}}'; } >"$corpus/q$i"
i=$((i + 1))
for f in reports/traces/tiresias-yarn-gput1000.csv tests/data/gittins-sizes.csv; do { printf '\x14'; cat "$f"; } >"$corpus/y$i"; i=$((i + 1)); done
for f in tests/fuzz/regressions/*; do [ "$(basename "$f")" = README.md ] || cp "$f" "$corpus/regression-$(basename "$f")"; done
for u in "80 GiB" "400 Gb/s" "989 TFLOP/s" "2.5 ms" "0.5 /s"; do printf '\x03%s' "$u" >"$corpus/u$i"; i=$((i + 1)); done

"./$build/tests/fuzz/fuzz_loaders" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 "$corpus"
