#!/usr/bin/env bash
# fleetsim compare on 2 MPI ranks prints and writes exactly what one process does.
set -u
mpiexec=$1
fleetsim=$2
scenario=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(compare "$scenario" --policies fifo,memory-aware,sjf --seeds 3 --threads 1)
"$fleetsim" "${args[@]}" --out "$tmp/one" >"$tmp/one.txt" 2>"$tmp/one.err" || { echo "FAIL one process"; exit 1; }
"$mpiexec" --oversubscribe -np 2 "$fleetsim" "${args[@]}" --out "$tmp/two" >"$tmp/two.txt" 2>"$tmp/two.err" || {
  echo "FAIL mpirun -np 2"; cat "$tmp/two.err"; exit 1; }
for f in one.txt one/comparison.csv one/comparison.json one/report.html; do
  if cmp -s "$tmp/$f" "$tmp/${f/one/two}"; then
    echo "ok   2 ranks give the $f one process gives"
  else
    echo "FAIL 2 ranks differ from one process in $f"; diff "$tmp/$f" "$tmp/${f/one/two}" | head -20; exit 1
  fi
done
# Notes come from rank 0 alone: as many as one process prints.
if [ "$(grep -c 'fleetsim: note' "$tmp/one.err")" = "$(grep -c 'fleetsim: note' "$tmp/two.err")" ]; then
  echo "ok   2 ranks print the notes one process prints ($(grep -c 'fleetsim: note' "$tmp/one.err")), once"
else
  echo "FAIL 2 ranks print notes more than once"; cat "$tmp/two.err"; exit 1
fi
