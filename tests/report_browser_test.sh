#!/usr/bin/env bash
# The HTML reports rendered by a real browser: headless Chromium loads each page, lays it out, and
# the page's own script records how many charts it has and how many laid out with data marks.
# Every chart must render. Skipped (exit 77) where no Chromium is installed.
set -u
fleetsim=$1
src=$2
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "no Chromium found (Debian package chromium): HTML report browser test skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}

# render PAGE EXPECTED_CHARTS: every chart laid out with data in it.
render() {
  local page=$1 expected=$2 dom
  dom=$("$browser" --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 --dump-dom "file://$page" 2>/dev/null)
  local charts rendered
  charts=$(grep -o 'data-charts="[0-9]*"' <<<"$dom" | grep -o '[0-9]*')
  rendered=$(grep -o 'data-rendered="[0-9]*"' <<<"$dom" | grep -o '[0-9]*')
  echo "     $(basename "$page"): ${charts:-?} charts, ${rendered:-?} rendered"
  [ -n "$charts" ] && [ "$charts" -ge "$expected" ] && [ "$charts" = "$rendered" ]
}

# round PAGE: every numeric axis of every chart has round ticks (1-2-5 steps, or powers of ten) and no exponent.
round() {
  local bad
  bad=$(dom "$1" | awk -f "$src/tests/round_ticks.awk")
  [ -z "$bad" ] || { echo "$bad" | sed 's/^/     /'; return 1; }
}
dom() { "$browser" --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 --dump-dom "file://$1" 2>/dev/null; }
# holds PAGE PATTERN: the rendered page contains the extended regular expression.
holds() { dom "$1" | grep -Ezq "$2"; }
# chart_lacks PAGE CHART_ID PATTERN: no mark of a chart whose id begins with CHART_ID mentions the pattern.
chart_lacks() {
  ! dom "$1" | awk -v id="$2" 'BEGIN { RS = "<svg class=\"chart\"" } index($0, " id=\"" id) == 1 { print substr($0, 1, index($0, "</svg>")) }' |
    grep -q "$3"
}

"$fleetsim" --quiet simulate "$src/scenarios/default.json" --report "$tmp/run.html" >/dev/null
check "run report: Gantt, utilization, queue, VRAM, cost, latency CDF and link heatmap render" render "$tmp/run.html" 7
check "run report: round ticks" round "$tmp/run.html"
check "run report: the link heatmap has a colour scale" holds "$tmp/run.html" 'class="scale"'
"$fleetsim" --quiet simulate "$src/scenarios/training-shared.json" --report "$tmp/training.html" >/dev/null
check "run report with training jobs: its charts render" render "$tmp/training.html" 7
check "run report with training jobs: each job's iteration against alone on the first screen" holds "$tmp/training.html" \
  '<h2>Summary</h2>.*<th>training llama-8b-a</th><td>[0-9.]+ s an iteration \(mean\), 1\.[0-9]+x its time alone.*<h2>GPUs</h2>.*<h2>Training</h2>'
"$fleetsim" --quiet compare "$src/scenarios/studio.json" --seeds 2 --policies fifo,sjf,priority --report "$tmp/compare.html" >/dev/null
check "comparison report: a chart per metric renders" render "$tmp/compare.html" 11
check "comparison report: round ticks" round "$tmp/compare.html"
check "comparison report: a table of means with their intervals" holds "$tmp/compare.html" '<table id="comparison">.*<td class="n">[0-9.]+ ± [0-9.]+</td>'
check "comparison report: the tenants' p95 targets are drawn" holds "$tmp/compare.html" 'target 10 s'
check "comparison report: percentages end at 100" chart_lacks "$tmp/compare.html" "compare-GPU-utilization" '>1[1-9]0<\|>[2-9][0-9][0-9]<'
# A trace replay: one run each, latencies over decades (a log axis of round times).
"$fleetsim" --quiet compare "$src/scenarios/trace-replay.json" --policies fifo,las --report "$tmp/replay.html" >/dev/null
check "comparison report of a replay: the latency distributions render" holds "$tmp/replay.html" 'id="compare-latency-cdf"'
check "comparison report of a replay: round ticks" round "$tmp/replay.html"
check "comparison report of a replay: each policy's queue over time" holds "$tmp/replay.html" 'id="compare-queue".*<title>fifo</title>.*<title>las</title>'
"$fleetsim" --quiet plan "$src/scenarios/plans/comfyui-studio.json" --report "$tmp/plan.html" >/dev/null
check "plan report: a frontier a load renders" render "$tmp/plan.html" 3
check "plan report: round ticks" round "$tmp/plan.html"
check "plan report: the recommendation in words" holds "$tmp/plan.html" '<li>At load 1x: <b>[0-9]+ × [a-z0-9-]+</b>.* a month</b>: p95 latency'
check "plan report: configurations that cannot run are listed apart" holds "$tmp/plan.html" '<table id="infeasible">.*rtx4090-pcie-8'
check "plan report: and never plotted" chart_lacks "$tmp/plan.html" "frontier" "rtx4090"
check "plan report: points coloured by node type, named in the legend" holds "$tmp/plan.html" 'id="frontier".*>hgx-h100-8<.*>l40s-pcie-8<.*>Pareto frontier<'
"$fleetsim" --quiet calibrate --repeats 1 --out "$tmp/cpu.json" >/dev/null
"$fleetsim" --quiet validate "$src/scenarios/cpu-validate.json" --profile "$tmp/cpu.json" --work-scale 0.05 --out "$tmp/val" --report "$tmp/validate.html" >/dev/null
check "validation report: the scatter renders" render "$tmp/validate.html" 1
"$fleetsim" --quiet serve "$src/scenarios/serving/llama-3-8b-chat.json" --report "$tmp/serve.html" >/dev/null
check "serving report: TTFT and TPOT distributions, batches and KV cache over time render" render "$tmp/serve.html" 4
check "serving report: round ticks" round "$tmp/serve.html"
check "serving report: the verdict in words" holds "$tmp/serve.html" '<b>Every SLO is met.</b> ttft p95 &lt;= 1 s: met'
check "serving report: the targets are drawn" holds "$tmp/serve.html" 'target: p95 within 1 s'

# Pictures to look at, when asked for: REPORT_SCREENSHOTS=DIR writes run.png, compare.png and plan.png there.
if [ -n "${REPORT_SCREENSHOTS:-}" ]; then
  mkdir -p "$REPORT_SCREENSHOTS"
  for page in run compare plan; do
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,2600 --screenshot="$REPORT_SCREENSHOTS/$page.png" "file://$tmp/$page.html" 2>/dev/null
  done
fi
[ "$failures" -eq 0 ]
