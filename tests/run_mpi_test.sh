#!/usr/bin/env bash
# fleetsim run on 2 MPI ranks (one per device of the scenario): rank 0 alone prints and writes the run,
# with every task of the plan; a rank count other than the device count is refused with the one to use; and
# the CUDA backend under mpirun runs, or says why it cannot.
set -u
mpiexec=$1
fleetsim=$2
scenario=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$mpiexec" --oversubscribe -np 2 "$fleetsim" -q run "$scenario" --work-scale 0.05 --out "$tmp/run" >"$tmp/two.txt" 2>"$tmp/two.err" || {
  echo "FAIL mpirun -np 2 fleetsim run"; cat "$tmp/two.err"; exit 1; }
if [ "$(grep -c '^predicted (simulated) against measured' "$tmp/two.txt")" = 1 ] && grep -q '^tasks compared *15$' "$tmp/two.txt"; then
  echo "ok   one comparison printed, of all 15 tasks"
else
  echo "FAIL rank 0 alone should print the comparison of 15 tasks"; cat "$tmp/two.txt"; fail=1
fi
if [ "$(grep -c ',completed,' "$tmp/run/trace.csv")" = 15 ] && cmp -s <(cut -d, -f1-3,6 "$tmp/run/trace.csv") <(cut -d, -f1-3,6 "$tmp/run/predicted_trace.csv"); then
  echo "ok   the measured trace has the plan's tasks on the plan's devices, all completed"
else
  echo "FAIL the measured trace differs from the plan in tasks or devices"; fail=1
fi
"$mpiexec" --oversubscribe -np 2 "$fleetsim" -q run "$scenario" --dry-run >"$tmp/dry.txt" 2>&1
if [ "$(grep -c '^n0.g0 ' "$tmp/dry.txt")" = 1 ]; then
  echo "ok   --dry-run prints the schedule once"
else
  echo "FAIL --dry-run on 2 ranks should print the schedule once"; cat "$tmp/dry.txt"; fail=1
fi
"$mpiexec" --oversubscribe -np 3 "$fleetsim" -q run "$scenario" --work-scale 0.05 >"$tmp/three.txt" 2>"$tmp/three.err"
rc=$?
if [ "$rc" = 1 ] && grep -q 'mpirun -np 2' "$tmp/three.err"; then
  echo "ok   3 ranks for 2 devices exit 1 naming mpirun -np 2"
else
  echo "FAIL 3 ranks for 2 devices: exit $rc"; cat "$tmp/three.err"; fail=1
fi
# The CUDA backend the same way: one GPU per rank where there are GPUs (ranks share them round-robin), else
# every rank stops before planning, saying why.
"$mpiexec" --oversubscribe -np 2 "$fleetsim" -q run "$scenario" --backend cuda --work-scale 20 --out "$tmp/cuda" >"$tmp/cuda.txt" 2>"$tmp/cuda.err"
rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c ',completed,' "$tmp/cuda/trace.csv")" = 15 ]; then
  echo "ok   --backend cuda on 2 ranks completes all 15 tasks"
elif [ "$rc" = 1 ] && grep -q 'the CUDA backend cannot run here' "$tmp/cuda.err"; then
  echo "ok   --backend cuda on 2 ranks exits 1 where it cannot run, saying why"
else
  echo "FAIL --backend cuda on 2 ranks: exit $rc"; cat "$tmp/cuda.txt" "$tmp/cuda.err"; fail=1
fi
exit $fail
