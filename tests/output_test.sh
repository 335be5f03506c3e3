#!/usr/bin/env bash
# Outputs as an unlucky user meets them: a device, a named pipe or a link given as an output is written
# through (or refused), never replaced by a file; an output directory is all or nothing, and a path that
# cannot take the output is refused before the work. Devices are made in a temporary directory (the
# system's own are never used), which needs root: without it those cases say they were skipped.
set -u
fleetsim=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
skipped=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
scenario=$src/scenarios/default.json

# A character device: written through, still a device afterwards.
if mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7 2>/dev/null; then
  "$fleetsim" simulate "$scenario" --report "$tmp/null" >/dev/null 2>"$tmp/null.err"
  check "--report to a null device exits 0" test $? -eq 0
  check "--report to a null device leaves it a device" test -c "$tmp/null"
  "$fleetsim" import trace --format philly "$src/tests/data/philly-sample.json" --out "$tmp/null" >/dev/null 2>&1
  check "import --out to a null device leaves it a device" test -c "$tmp/null"
  "$fleetsim" simulate "$scenario" --report "$tmp/full" >/dev/null 2>"$tmp/full.err"
  check "--report to a full device exits 1" test $? -eq 1
  check "--report to a full device says why" grep -q "error while writing the report to $tmp/full: No space left on device" "$tmp/full.err"
  check "--report to a full device leaves it a device" test -c "$tmp/full"
  for command in "catalog --json" "simulate $scenario --json" "compare $scenario --policies fifo --seeds 1 --json" \
                 "collective --cluster hgx-h100-8 --gpus 8 --json" "kernels --gpu h100-sxm --gemm 4096,4096,4096 --json"; do
    # shellcheck disable=SC2086
    "$fleetsim" $command >"$tmp/full" 2>"$tmp/json.err"
    rc=$?
    check "${command%% *} --json to a full device exits 1" test $rc -eq 1
  done
  check "stdout to a full device leaves it a device" test -c "$tmp/full"
else
  echo "skip the device cases: mknod needs root (or CAP_MKNOD) here"
  skipped=$((skipped + 1))
fi

# A named pipe: written through to its reader.
mkfifo "$tmp/pipe"
cat "$tmp/pipe" >"$tmp/piped.html" &
reader=$!
timeout 60 "$fleetsim" simulate "$scenario" --report "$tmp/pipe" >/dev/null 2>"$tmp/pipe.err"
check "--report to a FIFO exits 0" test $? -eq 0
wait "$reader"
check "--report to a FIFO stays a FIFO" test -p "$tmp/pipe"
check "--report to a FIFO reaches its reader" grep -q "</html>" "$tmp/piped.html"

# A link to a file stays a link; the file it names gets the output. A link to nothing is refused.
echo old >"$tmp/real.html"
ln -s real.html "$tmp/link.html"
"$fleetsim" simulate "$scenario" --report "$tmp/link.html" >/dev/null
check "--report through a link keeps the link" test -L "$tmp/link.html"
check "--report through a link writes the file it names" grep -q "</html>" "$tmp/real.html"
ln -s nowhere.html "$tmp/dangling.html"
"$fleetsim" simulate "$scenario" --report "$tmp/dangling.html" >"$tmp/dangling.out" 2>"$tmp/dangling.err"
check "--report to a link that leads nowhere exits 2" test $? -eq 2
check "--report to a link that leads nowhere says so" grep -q -- "--report: cannot write to $tmp/dangling.html: is a symbolic link to nowhere.html, which does not exist" "$tmp/dangling.err"
check "--report to a link that leads nowhere runs nothing" test ! -s "$tmp/dangling.out"

# A directory where a file is wanted, refused before the work.
mkdir "$tmp/adir"
"$fleetsim" simulate "$scenario" --report "$tmp/adir" >"$tmp/adir.out" 2>"$tmp/adir.err"
check "--report to a directory exits 2" test $? -eq 2
check "--report to a directory says so" grep -q -- "--report: cannot write to $tmp/adir: is a directory" "$tmp/adir.err"
"$fleetsim" calibrate --out "$tmp/adir" >"$tmp/cal.out" 2>"$tmp/cal.err"
check "calibrate --out to a directory exits 2 before measuring" bash -c "test $? -eq 2 && test ! -s '$tmp/cal.out'"
check "calibrate --out to a directory says so" grep -q -- "--out: cannot write to $tmp/adir: is a directory" "$tmp/cal.err"
for importer in "comfyui $src/tests/data/comfyui/$(ls "$src/tests/data/comfyui" | head -1)" "wfcommons $src/tests/data/wf14.json"; do
  # shellcheck disable=SC2086
  "$fleetsim" import $importer --out "$tmp/adir" >/dev/null 2>"$tmp/import.err"
  check "import ${importer%% *} --out to a directory exits 2" test $? -eq 2
  check "import ${importer%% *} --out to a directory says so" grep -q -- "--out: cannot write to $tmp/adir: is a directory" "$tmp/import.err"
done
"$fleetsim" validate "$src/scenarios/cpu-validate.json" --profile "$tmp/nothing.json" --out "$tmp/real.html" >/dev/null 2>"$tmp/val.err"
check "validate --out onto a file is refused before measuring" grep -q -- "--out: $tmp/real.html exists and is not a directory" "$tmp/val.err"

# An output directory: all or nothing, and an occupied name refused before the work.
mkdir -p "$tmp/occupied/trace.csv"
"$fleetsim" simulate "$scenario" --out "$tmp/occupied" >/dev/null 2>"$tmp/occupied.err"
check "--out with a directory in a file's place exits 2" test $? -eq 2
check "--out with a directory in a file's place says which" grep -q -- "--out: $tmp/occupied/trace.csv is a directory" "$tmp/occupied.err"
check "--out with a directory in a file's place writes nothing" test "$(ls -A "$tmp/occupied")" = trace.csv
mkdir -p "$tmp/cmp/report.html"
"$fleetsim" compare "$scenario" --policies fifo --seeds 1 --out "$tmp/cmp" >/dev/null 2>"$tmp/cmp.err"
check "compare --out with a directory in a file's place exits 2" test $? -eq 2
check "compare --out with a directory in a file's place writes nothing" test "$(ls -A "$tmp/cmp")" = report.html
"$fleetsim" simulate "$scenario" --out "$tmp/kept" >/dev/null
(cd "$tmp/kept" && md5sum ./* >"$tmp/kept.md5")
( trap '' XFSZ; ulimit -f 100; "$fleetsim" simulate "$scenario" --seed 7 --out "$tmp/kept" >/dev/null 2>"$tmp/kept.err" )
check "--out over an old run that cannot be written whole fails" grep -q "nothing was written to $tmp/kept: error while writing" "$tmp/kept.err"
check "--out over an old run that cannot be written whole leaves it as it was" bash -c "cd '$tmp/kept' && md5sum --quiet -c '$tmp/kept.md5'"
check "--out over an old run that cannot be written whole leaves no partial files" test -z "$(ls -A "$tmp" "$tmp/kept" | grep partial)"
"$fleetsim" simulate "$scenario" --seed 7 --out "$tmp/kept/" >/dev/null
check "--out over an old run replaces its files" bash -c "cd '$tmp/kept' && ! md5sum --quiet -c '$tmp/kept.md5' >/dev/null 2>&1"

[ "$skipped" -eq 0 ] || echo "note: $skipped group(s) of cases skipped, said above"
exit $((failures > 0))
