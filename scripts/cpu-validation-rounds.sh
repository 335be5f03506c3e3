#!/usr/bin/env bash
# Fresh calibrate + validate rounds on this machine's CPU backend, written to reports/cpu-validation.md:
# each round calibrates (fleetsim calibrate) and validates scenarios/cpu-validate.json against the median
# of REPEAT real runs, with their run-to-run noise.
#   scripts/cpu-validation-rounds.sh [ROUNDS (5)] [REPEAT (5)]
# Environment: FLEETSIM (default build/fleetsim), REPORT (default reports/cpu-validation.md); BUS=off
# validates each round's calibration also without the memory bus (the profile as calibrate wrote it
# before the bus: no shared bandwidth, every worker's bandwidth what each gets with all streaming), a
# second table for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
repeat=${2:-5}
fleetsim=${FLEETSIM:-build/fleetsim}
report=${REPORT:-reports/cpu-validation.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rows=""
nobus_rows=""
for r in $(seq 1 "$rounds"); do
  "$fleetsim" -q calibrate --out "$work/cpu-$r.json" >"$work/cal-$r.txt"
  "$fleetsim" -q validate scenarios/cpu-validate.json --profile "$work/cpu-$r.json" --repeat "$repeat" --json --out "$work/val-$r" >"$work/val-$r.json"
  if [ "${BUS:-on}" = off ]; then
    python3 - "$work/cpu-$r.json" "$work/nobus-$r.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
g = p["gpus"]["cpu-core"]
g.pop("shared_memory_bandwidth", None)
ms = [m for m in p["measurements"] if m["kernel"] == "stream"]
rate = sum(m["size"] * m["seconds"] for m in ms) / sum(m["seconds"] ** 2 for m in ms)  # through the origin, relative
g["memory_bandwidth"] = "%.6g B/s" % rate
json.dump(p, open(sys.argv[2], "w"))
PY
    "$fleetsim" -q validate scenarios/cpu-validate.json --profile "$work/nobus-$r.json" --repeat "$repeat" --json --out "$work/nobus-val-$r" >"$work/nobus-val-$r.json"
    nobus=$(python3 - "$work/nobus-val-$r.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
met = v["median_abs_error"] <= 0.05 and abs(v["makespan_error"]) <= 0.03
print("| %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% | %s |" % (100 * v["median_abs_error"], 100 * v["p90_abs_error"], 100 * v["makespan_error"],
      100 * v["task_noise"], 100 * v["makespan_noise"], "yes" if met else "no"))
PY
)
    nobus_rows+="| $r $nobus"$'\n'
  fi
  row=$(python3 - "$work/cpu-$r.json" "$work/val-$r.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
v = json.load(open(sys.argv[2]))
g = p["gpus"]["cpu-core"]
def num(q): return float(q.split()[0])
fp32 = num(g["peak_flops"]["fp32"]) / 1e9
alone = num(g["memory_bandwidth"]) / 1e9
shared = num(g["shared_memory_bandwidth"]) / 1e9 if "shared_memory_bandwidth" in g else float("nan")
met = v["median_abs_error"] <= 0.05 and abs(v["makespan_error"]) <= 0.03
print("| %.1f | %.1f | %.1f | %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% | %s |" % (
    fp32, alone, shared, 100 * v["median_abs_error"], 100 * v["p90_abs_error"], 100 * v["makespan_error"],
    100 * v["task_noise"], 100 * v["makespan_noise"], "yes" if met else "no"))
PY
)
  echo "round $r: $row"
  rows+="| $r $row"$'\n'
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
{
  echo "# CPU backend: predicted against measured, fresh calibrations"
  echo
  echo "Written by \`scripts/cpu-validation-rounds.sh $rounds $repeat\`: $rounds rounds, each a fresh \`fleetsim calibrate\` then"
  echo "\`fleetsim validate scenarios/cpu-validate.json --profile P --repeat $repeat\` (errors against the median of $repeat real runs)."
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nproc) cores, $cpu"
  echo "- fleetsim $(git describe --always --dirty 2>/dev/null || echo '(no git)'), Release build"
  echo "- targets (issue 25): median task error <= 5% and makespan error <= 3% in at least four of five rounds"
  echo
  echo "| round | fp32 (GFLOP/s) | one worker's memory (GB/s) | shared memory bus (GB/s) | median task error | p90 | makespan error | run-to-run noise, task | noise, makespan | both targets met |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  printf "%s" "$rows"
  echo
  echo "The noise columns are what this machine lets anyone tell: over tasks, the median of each task's median"
  echo "deviation from its own median across the $repeat runs (and the makespan's). An error at or below them is"
  echo "as close as a model can be shown to be here."
  if [ -n "$nobus_rows" ]; then
    echo
    echo "The same rounds' calibrations without the memory bus (\`BUS=off\`: no shared bandwidth; each worker's bandwidth"
    echo "what it gets with all streaming, as profiles had it before), validated right after:"
    echo
    echo "| round | median task error | p90 | makespan error | run-to-run noise, task | noise, makespan | both targets met |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    printf "%s" "$nobus_rows"
  fi
} >"$report"
echo "wrote $report"
