#!/usr/bin/env bash
# The README's two commands. `run` (default): install what is missing, build, simulate the default
# scenario. `test`: install what is missing, build, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
case "$mode" in run | test) ;; *) echo "usage: bash scripts/quickstart.sh [run|test]" >&2; exit 2 ;; esac

bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

if [ "$mode" = run ]; then
  ./build/fleetsim simulate scenarios/default.json
else
  ctest --test-dir build --output-on-failure -j"$(nproc)"
fi
