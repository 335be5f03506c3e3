#!/usr/bin/env bash
# One command on a GPU machine: configures fleetsim with the CUDA backend in build-gpu/, builds it,
# runs every test (the GPU tests included), calibrates the local GPUs (fleetsim calibrate --backend
# cuda -> build-gpu/profiles/cuda.json) and validates a run with that profile (build-gpu/validation/). Uses the packages scripts/gpu-deps.sh gathered in .deps/
# when they are there (unpacking .deps/debs with dpkg-deb, or ar and tar, when .deps/root is missing),
# else the system's. Needs CMake >= 3.20, a C++20 compiler, nvcc and (for NCCL collectives) NCCL;
# CUDA_HOME or nvcc on PATH, NCCL_HOME if NCCL is not under CUDA's root.
# Usage: bash scripts/gpu-build.sh [extra CMake arguments, e.g. -DCMAKE_CUDA_ARCHITECTURES=90]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
root=$PWD/.deps/root

if [ ! -d "$root" ] && compgen -G ".deps/debs/*.deb" >/dev/null; then
  mkdir -p "$root.tmp"
  for deb in .deps/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$root.tmp"
    else  # a .deb is an ar archive holding data.tar.*; ar comes with the compiler nvcc uses
      member=$(ar t "$deb" | grep '^data\.tar')
      case "$member" in
        *.xz) ar p "$deb" "$member" | tar -xJ -C "$root.tmp" ;;
        *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$root.tmp" ;;
        *.gz) ar p "$deb" "$member" | tar -xz -C "$root.tmp" ;;
        *) echo "gpu-build: cannot unpack $deb ($member)" >&2; exit 1 ;;
      esac
    fi
  done
  mv "$root.tmp" "$root"
fi

args=(-DCMAKE_BUILD_TYPE=Release -DFLEETSIM_BENCH=OFF)
if [ -d "$root" ]; then
  # Each package's CMake files, named outright, so no system copy can win.
  find_dir() { find "$root" -name "$1" -printf '%h\n' -quit; }
  for pkg in Boost:BoostConfig.cmake Eigen3:Eigen3Config.cmake CLI11:CLI11Config.cmake \
             nlohmann_json:nlohmann_jsonConfig.cmake Catch2:Catch2Config.cmake; do
    dir=$(find_dir "${pkg#*:}")
    [ -n "$dir" ] || { echo "gpu-build: .deps/root has no ${pkg#*:}; run scripts/gpu-deps.sh again" >&2; exit 1; }
    args+=("-D${pkg%%:*}_DIR=$dir")
  done
  args+=("-DCMAKE_PREFIX_PATH=$root/usr")
  echo "gpu-build: using the packages in .deps/root"
else
  echo "gpu-build: no .deps/ (scripts/gpu-deps.sh); using the system's packages"
fi
command -v ninja >/dev/null && args+=(-G Ninja)

cmake -S . -B "$build" "${args[@]}" "$@"
grep -q "FLEETSIM_NVCC:FILEPATH=.*nvcc" "$build/CMakeCache.txt" || echo "gpu-build: warning: no nvcc found; the CUDA backend is not built" >&2
jobs=${JOBS:-$(nproc)}  # JOBS=1 on a shared machine
cmake --build "$build" -j"$jobs"
status=0
# Where MPI is found, the run_mpi test among them runs the CUDA backend over 2 MPI ranks too.
ctest --test-dir "$build" --output-on-failure -j"$jobs" || status=$?
# The GPU tests report "skipped" where no device is visible: on a GPU machine that is a failure.
if ctest --test-dir "$build" -R '^gpu$' 2>&1 | grep -q "Skipped"; then
  "$build/tests/fleetsim_gpu_tests" || true
  echo "gpu-build: the GPU tests were skipped: no usable CUDA device here" >&2
  [ "$status" -ne 0 ] || status=3
  exit "$status"
fi
# The CUDA calibration and a validation run with its profile, on this machine's GPUs.
"$build/fleetsim" calibrate --backend cuda --out "$build/profiles/cuda.json" || { echo "gpu-build: fleetsim calibrate --backend cuda failed" >&2; [ "$status" -ne 0 ] || status=4; }
# The GPU validation graph (one GPU) on the calibrated node type.
node=$(grep -o '"node type": "[^"]*"' "$build/profiles/cuda.json" 2>/dev/null | cut -d'"' -f4 || true)
if [ -n "$node" ] && [ "$node" != none ]; then
  "$build/fleetsim" validate scenarios/gpu-validate.json --backend cuda --profile "$build/profiles/cuda.json" \
    --set "/cluster/nodes/0/type=$node" --out "$build/validation" ||
    { echo "gpu-build: fleetsim validate --backend cuda failed" >&2; [ "$status" -ne 0 ] || status=5; }
elif [ -f "$build/profiles/cuda.json" ]; then
  echo "gpu-build: the profile names no catalog node type; validation skipped (calibrate with --node-type)" >&2
fi
exit "$status"
