#!/usr/bin/env bash
# Every file in tests/rejected must be refused with exit code 2 and the message in its .expected
# file (which names the file and the field), and produce no output on stdout.
set -u
fleetsim=$1
dir=$2
failures=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for input in "$dir"/*.json; do
  expected=$(cat "${input%.json}.expected")
  out=$("$fleetsim" simulate "$input" 2>"$err")
  code=$?
  if [ $code -ne 2 ]; then echo "FAIL $(basename "$input"): exit $code, expected 2"; failures=$((failures + 1)); continue; fi
  if ! grep -qF -- "$(basename "$input"): " "$err" || ! grep -qF -- "$expected" "$err"; then
    echo "FAIL $(basename "$input"): message was:"; cat "$err"; echo "expected to contain: $expected"
    failures=$((failures + 1)); continue
  fi
  if [ -n "$out" ]; then echo "FAIL $(basename "$input"): printed on stdout"; failures=$((failures + 1)); continue; fi
  echo "ok   $(basename "$input")"
done
echo "rejected: $failures failed"
test $failures -eq 0
