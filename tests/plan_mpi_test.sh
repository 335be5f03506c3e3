#!/usr/bin/env bash
# fleetsim plan on 2 MPI ranks prints exactly what one process prints.
set -u
mpiexec=$1
fleetsim=$2
plan=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fleetsim" plan "$plan" --json --threads 1 >"$tmp/one.json" || { echo "FAIL one process"; exit 1; }
"$mpiexec" --oversubscribe -np 2 "$fleetsim" plan "$plan" --json --threads 1 >"$tmp/two.json" 2>"$tmp/two.err" || {
  echo "FAIL mpirun -np 2"; cat "$tmp/two.err"; exit 1; }
if cmp -s "$tmp/one.json" "$tmp/two.json"; then
  echo "ok   2 ranks give the plan one process gives ($(grep -c '"load"' "$tmp/one.json") load entries and points)"
else
  echo "FAIL 2 ranks differ from one process"; diff "$tmp/one.json" "$tmp/two.json" | head -20; exit 1
fi
