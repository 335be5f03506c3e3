#!/usr/bin/env bash
# Fresh calibrate + validate rounds on this machine's CPU backend, written to reports/cpu-validation.md:
# each round calibrates (fleetsim calibrate) and validates scenarios/cpu-validate.json against the median of
# REPEAT real runs, with their run-to-run noise and validate's check of the profile's rates before and after
# the runs (how far the machine has moved from its calibration).
#   scripts/cpu-validation-rounds.sh [ROUNDS (5)] [REPEAT (5)]
# Environment: FLEETSIM (default build/fleetsim), REPORT (default reports/cpu-validation.md); WITHOUT=bus
# validates each round's calibration also without the memory bus (the profile as calibrate wrote it
# before the bus: no shared bandwidth, every worker's bandwidth what each gets with all streaming),
# WITHOUT=pool without the compute pool (every worker's rate what each gets with all computing), a
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
without=${WITHOUT:-}
without_rows=""
validate() {  # PROFILE OUT
  "$fleetsim" -q validate scenarios/cpu-validate.json --profile "$1" --repeat "$repeat" --json --out "$2" >"$2.json"
}
for r in $(seq 1 "$rounds"); do
  "$fleetsim" -q calibrate --out "$work/cpu-$r.json" >"$work/cal-$r.txt"
  if [ -n "$without" ]; then
    python3 - "$work/cpu-$r.json" "$work/without-$r.json" "$without" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
g = p["gpus"]["cpu-core"]
if sys.argv[3] == "bus":
    g.pop("shared_memory_bandwidth", None)
    ms = [m for m in p["measurements"] if m["kernel"] == "stream"]
    rate = sum(m["size"] * m["seconds"] for m in ms) / sum(m["seconds"] ** 2 for m in ms)  # through the origin, relative
    g["memory_bandwidth"] = "%.6g B/s" % rate
elif sys.argv[3] == "pool":
    # Back to the rates every worker gets with all computing: calibrate raised them by workers / pool.
    share = g.pop("compute_pool", 1) / float(p["provenance"].get("workers", 1))
    for d, q in g["peak_flops"].items():
        value, unit = q.split()
        g["peak_flops"][d] = "%.6g %s" % (float(value) * share, unit)
else:
    sys.exit("WITHOUT is bus or pool, not " + sys.argv[3])
json.dump(p, open(sys.argv[2], "w"))
PY
  fi
  # The later validation is further from the calibration, on a machine that drifts: the two take turns going first.
  if [ -n "$without" ] && [ $((r % 2)) -eq 0 ]; then
    validate "$work/without-$r.json" "$work/without-val-$r"
    validate "$work/cpu-$r.json" "$work/val-$r"
  else
    validate "$work/cpu-$r.json" "$work/val-$r"
    if [ -n "$without" ]; then validate "$work/without-$r.json" "$work/without-val-$r"; fi
  fi
  if [ -n "$without" ]; then
    without_row=$(python3 - "$work/without-val-$r.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
met = v["median_abs_error"] <= 0.05 and abs(v["makespan_error"]) <= 0.03
print("| %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% | %s |" % (100 * v["median_abs_error"], 100 * v["p90_abs_error"], 100 * v["makespan_error"],
      100 * v["task_noise"], 100 * v["makespan_noise"], "yes" if met else "no"))
PY
)
    without_rows+="| $r $without_row"$'\n'
  fi
  row=$(python3 - "$work/cpu-$r.json" "$work/val-$r.json" "$work/val-$r/task_errors.csv" <<'PY'
import csv, json, statistics, sys
p = json.load(open(sys.argv[1]))
v = json.load(open(sys.argv[2]))
by_task = {}
for t in csv.DictReader(open(sys.argv[3])):
    by_task.setdefault(t["task"].split("/")[-1], []).append(float(t["relative_error"]))
per_task = ", ".join("%s %+.0f%%" % (k, 100 * statistics.median(e)) for k, e in by_task.items())
g = p["gpus"]["cpu-core"]
def num(q): return float(q.split()[0])
fp32 = num(g["peak_flops"]["fp32"]) / 1e9
alone = num(g["memory_bandwidth"]) / 1e9
shared = num(g["shared_memory_bandwidth"]) / 1e9 if "shared_memory_bandwidth" in g else float("nan")
pool = g.get("compute_pool", float("nan"))
# The machine against the profile, before the runs and after them: each figure's change in percent.
check = " ; ".join("%+.0f / %+.0f" % (100 * (f["before"] / f["profile"] - 1), 100 * (f["after"] / f["profile"] - 1))
                   for f in v.get("profile_check", []))
met = v["median_abs_error"] <= 0.05 and abs(v["makespan_error"]) <= 0.03
print("| %.1f | %.2f | %.1f | %.1f | %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% | %s | %s | %s |" % (
    fp32, pool, alone, shared, 100 * v["median_abs_error"], 100 * v["p90_abs_error"], 100 * v["makespan_error"],
    100 * v["task_noise"], 100 * v["makespan_noise"], check, "yes" if met else "no", per_task))
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
  echo "- earlier runs and their analysis: [cpu-validation-history.md](cpu-validation-history.md)"
  echo
  echo "| round | one worker's fp32 alone (GFLOP/s) | compute pool (workers' worth) | one worker's memory (GB/s) | shared memory bus (GB/s) | median task error | p90 | makespan error | run-to-run noise, task | noise, makespan | machine against the profile, % before / after the runs: fp32 alone ; all busy ; stream alone ; all streaming | both targets met | per task, median error (+: predicted too slow) |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
  printf "%s" "$rows"
  echo
  echo "The noise columns are what this machine lets anyone tell: over tasks, the median of each task's median"
  echo "deviation from its own median across the $repeat runs (and the makespan's). An error at or below them is"
  echo "as close as a model can be shown to be here. The machine column is validate's own check: the calibration's"
  echo "points run again right before and right after the real runs, against the rates the profile gives them (+: the"
  echo "machine faster than calibrated). An error the size of those changes can be the machine's, not the model's."
  if [ -n "$without_rows" ]; then
    echo
    if [ "$without" = bus ]; then
      echo "The same rounds' calibrations without the memory bus (\`WITHOUT=bus\`: no shared bandwidth; each worker's bandwidth"
      echo "what it gets with all streaming, as profiles had it before), validated beside it (the two take turns going first):"
    else
      echo "The same rounds' calibrations without the compute pool (\`WITHOUT=pool\`: each worker's rate what it gets with"
      echo "all computing, as profiles had it before), validated beside it (the two take turns going first):"
    fi
    echo
    echo "| round | median task error | p90 | makespan error | run-to-run noise, task | noise, makespan | both targets met |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    printf "%s" "$without_rows"
  fi
} >"$report"
echo "wrote $report"
