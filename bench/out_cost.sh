#!/usr/bin/env bash
# What `--out` costs: wall time and peak memory of `fleetsim simulate` on N one-task workflows on 1,024
# H100s (Poisson arrivals at half capacity), without and with --out, and the size of what it writes.
#   bash bench/out_cost.sh build/fleetsim 300000 [10000000 ...]
set -euo pipefail
bin=$(realpath "$1")
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

scenario() {  # scenario COUNT RATE
  cat <<JSON
{"name": "out-cost", "seed": 1,
 "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 128}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 16, "oversubscription": 2}},
 "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
 "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "$2 /s", "count": $1}}],
 "policy": {"name": "fifo"}}
JSON
}

# One task alone gives its busy time; half of 1,024 GPUs' capacity is 512 / busy arrivals per second.
scenario 1 1 >"$work/probe.json"
busy=$("$bin" simulate "$work/probe.json" --json -q | sed -n 's/.*"makespan_s": *\([0-9.e+-]*\).*/\1/p' | head -1)
rate=$(awk -v b="$busy" 'BEGIN { printf "%.6g", 512 / b }')

printf '%-12s %-10s %10s %10s %10s %12s %10s\n' tasks run wall_s peak_MiB ratio_time ratio_memory out_MB
for tasks in "$@"; do
  scenario "$tasks" "$rate" >"$work/s.json"
  /usr/bin/time -f '%e %M' -o "$work/plain.time" "$bin" simulate "$work/s.json" -q >/dev/null
  rm -rf "$work/out"
  /usr/bin/time -f '%e %M' -o "$work/out.time" "$bin" simulate "$work/s.json" --out "$work/out" -q >/dev/null
  read -r plain_s plain_kb <"$work/plain.time"
  read -r out_s out_kb <"$work/out.time"
  out_mb=$(du -sm "$work/out" | cut -f1)
  rm -rf "$work/out"
  awk -v t="$tasks" -v ps="$plain_s" -v pk="$plain_kb" -v os="$out_s" -v ok="$out_kb" -v mb="$out_mb" 'BEGIN {
    printf "%-12s %-10s %10.2f %10.0f\n", t, "plain", ps, pk / 1024
    printf "%-12s %-10s %10.2f %10.0f %10.2f %12.2f %10d\n", t, "--out", os, ok / 1024, os / ps, ok / pk, mb }'
done
