#!/usr/bin/env bash
# fleetsim train --search on 2 MPI ranks ranks exactly what one process ranks: the shipped data-parallel job, and a
# job whose configurations fit only by offloading (each rank's offload travels with its times).
set -u
mpiexec=$1
fleetsim=$2
job=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/offload.json" <<'JOB'
{"name": "llama-3-70b-offload", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
 "model": {"architecture": "llama-3-70b", "seq_len": 4096}, "batch": {"global": 32}, "recompute": "full",
 "parallel": {"dp": 8, "zero": 3, "offload_parameters": true}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}}
JOB
for file in "$job" "$tmp/offload.json"; do
  "$fleetsim" train "$file" --search --json --top 20 --threads 1 >"$tmp/one.json" || { echo "FAIL one process: $file"; exit 1; }
  "$mpiexec" --oversubscribe -np 2 "$fleetsim" train "$file" --search --json --top 20 --threads 1 >"$tmp/two.json" 2>"$tmp/two.err" || {
    echo "FAIL mpirun -np 2: $file"; cat "$tmp/two.err"; exit 1; }
  if cmp -s "$tmp/one.json" "$tmp/two.json"; then
    echo "ok   2 ranks rank what one process ranks: $(basename "$file") ($(grep -c '"tp"' "$tmp/one.json") shown)"
  else
    echo "FAIL 2 ranks differ from one process: $file"; diff "$tmp/one.json" "$tmp/two.json" | head -20; exit 1
  fi
done
