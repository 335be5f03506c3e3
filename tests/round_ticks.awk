# Reads a page's DOM (as headless Chromium dumps it) and prints one line per chart axis whose numeric
# tick labels are not round: evenly spaced by 1, 2 or 5 times a power of ten, or powers of ten (a log
# axis), with no exponent. Axes of names (policies, GPUs, links) are skipped. No output: all round.
BEGIN { RS = "<svg class=\"chart\"" }
NR > 1 {
  id = $0
  sub(/^ id="/, "", id)
  sub(/".*/, "", id)
  check(id, "x", $0)
  check(id, "y", $0)
}

function check(id, axis, chart,    rest, label, n, i, v, l, r, values, step, d, mantissa, powers) {
  rest = chart
  n = 0
  while (match(rest, "class=\"tick-" axis "\"[^>]*>[^<]*<")) {
    label = substr(rest, RSTART, RLENGTH)
    rest = substr(rest, RSTART + RLENGTH)
    sub(/^[^>]*>/, "", label)
    sub(/<$/, "", label)
    if (label ~ /e[+-][0-9]/) { print id " " axis ": an exponent in tick \"" label "\""; return }
    # A number, perhaps with a currency sign, thousands separators and a unit.
    if (label !~ /^\$?-?[0-9][0-9,]*(\.[0-9]+)?( ?([a-zA-Z]+|%))?$/) return
    gsub(/[$,]/, "", label)
    values[++n] = label + 0
  }
  if (n < 3) return
  powers = 1
  for (i = 1; i <= n; i++) {
    v = values[i]
    if (v <= 0) { powers = 0; continue }
    l = log(v) / log(10)
    r = int(l + (l >= 0 ? 0.5 : -0.5))
    if (l - r > 1e-9 || r - l > 1e-9) powers = 0
  }
  if (powers) return
  step = values[2] - values[1]
  for (i = 3; i <= n; i++) {
    d = values[i] - values[i - 1]
    if (d - step > 1e-6 * step || step - d > 1e-6 * step) { print id " " axis ": uneven ticks " values[i - 1] ", " values[i]; return }
  }
  if (step <= 0) { print id " " axis ": ticks not increasing"; return }
  mantissa = step / exp(log(10) * int(log(step) / log(10) + (step < 1 ? -1 + 1e-9 : 1e-9)))
  if (mantissa > 1 + 1e-6 && (mantissa < 2 - 1e-6 || mantissa > 2 + 1e-6) && (mantissa < 5 - 1e-6 || mantissa > 5 + 1e-6)) {
    print id " " axis ": a step of " step " is not 1, 2 or 5 times a power of ten"
  }
}
