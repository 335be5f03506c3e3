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

"$fleetsim" --quiet simulate "$src/scenarios/default.json" --report "$tmp/run.html" >/dev/null
check "run report: Gantt, utilization, queue, VRAM, cost, latency CDF and link heatmap render" render "$tmp/run.html" 7
"$fleetsim" --quiet compare "$src/scenarios/default.json" --seeds 2 --policies fifo,sjf --report "$tmp/compare.html" >/dev/null
check "comparison report: a chart per metric renders" render "$tmp/compare.html" 10
"$fleetsim" --quiet plan "$src/scenarios/plans/comfyui-studio.json" --report "$tmp/plan.html" >/dev/null
check "plan report: the frontier renders" render "$tmp/plan.html" 1
"$fleetsim" --quiet calibrate --repeats 1 --out "$tmp/cpu.json" >/dev/null
"$fleetsim" --quiet validate "$src/scenarios/cpu-validate.json" --profile "$tmp/cpu.json" --work-scale 0.05 --out "$tmp/val" --report "$tmp/validate.html" >/dev/null
check "validation report: the scatter renders" render "$tmp/validate.html" 1

# A picture to look at, when asked for: REPORT_SCREENSHOT=run.png
if [ -n "${REPORT_SCREENSHOT:-}" ]; then
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,2600 --screenshot="$REPORT_SCREENSHOT" "file://$tmp/run.html" 2>/dev/null
fi
[ "$failures" -eq 0 ]
