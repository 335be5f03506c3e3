#!/usr/bin/env bash
# Every file in tests/rejected must be refused with exit code 2 and the message in its .expected
# file (which names the file and the field), and produce no output on stdout.
set -u
fleetsim=$1
dir=$2
failures=0
for input in "$dir"/*.json; do
  expected=$(cat "${input%.json}.expected")
  out=$("$fleetsim" simulate "$input" 2>/tmp/rejected.$$ )
  code=$?
  if [ $code -ne 2 ]; then echo "FAIL $(basename "$input"): exit $code, expected 2"; failures=$((failures + 1)); continue; fi
  if ! grep -qF -- "$(basename "$input"): " /tmp/rejected.$$ || ! grep -qF -- "$expected" /tmp/rejected.$$; then
    echo "FAIL $(basename "$input"): message was:"; cat /tmp/rejected.$$; echo "expected to contain: $expected"
    failures=$((failures + 1)); continue
  fi
  if [ -n "$out" ]; then echo "FAIL $(basename "$input"): printed on stdout"; failures=$((failures + 1)); continue; fi
  echo "ok   $(basename "$input")"
done
rm -f /tmp/rejected.$$
echo "rejected: $failures failed"
test $failures -eq 0
