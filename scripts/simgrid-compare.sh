#!/usr/bin/env bash
# fleetsim side by side with SimGrid: installs SimGrid (Debian's libsimgrid-dev) when missing,
# builds the comparison harness in its own build directory, runs it and writes the table with the
# command, date and machine to reports/simgrid-comparison.md.
#   scripts/simgrid-compare.sh [harness options...]   (default: --sizes 100,1000,10000,100000)
# Environment: BUILD_DIR (default build-simgrid), JOBS (default 1), REPORT (default reports/simgrid-comparison.md).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build-simgrid}
jobs=${JOBS:-1}
report=${REPORT:-reports/simgrid-comparison.md}
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--sizes 100,1000,10000,100000); fi

if ! pkg-config --exists 'simgrid >= 3.32'; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "simgrid-compare: SimGrid >= 3.32 is missing; run as root or install libsimgrid-dev yourself" >&2
    exit 1
  fi
  echo "simgrid-compare: installing libsimgrid-dev"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libsimgrid-dev
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLEETSIM_SIMGRID=ON -DFLEETSIM_CUDA=OFF >/dev/null
ninja -C "$build_dir" -j "$jobs" fleetsim_vs_simgrid
harness="$build_dir/fleetsim_vs_simgrid"
if [ ! -x "$harness" ]; then
  echo "simgrid-compare: $harness was not built (is Google Benchmark installed? bench/ needs it)" >&2
  exit 1
fi

table=$(mktemp)
notes=$(mktemp)
trap 'rm -f "$table" "$notes"' EXIT
"$harness" "${args[@]}" | tee "$table"
# The eager style (every SimGrid activity created before the run) up to 10,000 tasks: quadratic in SimGrid 3.32.
"$harness" --sizes 100,1000,10000 --simgrid-style eager --sensitivity 0 >"$notes.eager" 2>/dev/null || true
"$harness" --sizes 100,1000 --kinds layered,chains --node-type l40s-pcie-8 --nodes 2 --sensitivity 0 >"$notes.links" 2>/dev/null || true
"$harness" --sizes 100,1000 --kinds layered,chains --node-type l40s-pcie-8 --nodes 2 --sensitivity 0 --latency after >"$notes.after" 2>/dev/null || true

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
# Before the report is opened for writing: rewriting it would make every run look dirty.
version=$(git describe --always --dirty 2>/dev/null || echo '(no git)')
mkdir -p "$(dirname "$report")"
{
  echo "# fleetsim side by side with SimGrid"
  echo
  echo "Written by \`scripts/simgrid-compare.sh ${args[*]}\`; see docs/simgrid.md for what is compared and timed."
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nproc) cores, $cpu, Linux $(uname -r)"
  echo "- SimGrid $(pkg-config --modversion simgrid) (Debian libsimgrid-dev $(dpkg-query -W -f='${Version}' libsimgrid-dev 2>/dev/null || echo '?')), CM02 with latency factor 1, bandwidth factor 1, weight-S 0, TCP-gamma 0, no cross-traffic"
  echo "- fleetsim $version, Release build; both single-threaded; wall times are each side's median over --reps rounds (3 unless given), a run of each a round, and the ratio the median of the rounds' ratios"
  echo "- platform: hgx-h100-8 nodes on one switch (2 nodes at 100 tasks, doubling per factor 10 of tasks); policy fifo"
  echo
  echo "## hgx-h100-8, single switch"
  echo
  echo "SimGrid creates each activity when the ones it depends on have finished (\`--simgrid-style lazy\`, as a SimGrid user would write a large DAG):"
  echo
  cat "$table"
  echo
  echo "The same with every SimGrid activity created before the run (\`--simgrid-style eager\`). SimGrid 3.32's time then grows"
  echo "with the square of the DAG: at 10,000 tasks about three quarters of its samples (perf) are in one small loop of"
  echo "its communication code. The README's comparison before 2026-11-27 measured this style, not SimGrid's engine:"
  echo
  cat "$notes.eager"
  echo
  echo "## Where CM02 is not max-min: l40s-pcie-8 (flows of different route latencies share PCIe links)"
  echo
  echo "SimGrid with latencies on its links (CM02 as is):"
  echo
  cat "$notes.links"
  echo
  echo "SimGrid with zero-latency links and each route's latency paid after the bytes (\`--latency after\`):"
  echo
  cat "$notes.after"
} >"$report"
rm -f "$notes.links" "$notes.after" "$notes.eager"
echo "simgrid-compare: wrote $report"
