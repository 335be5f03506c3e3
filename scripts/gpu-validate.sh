#!/usr/bin/env bash
# Everything fleetsim checks on a real GPU, in one command, for a machine with an NVIDIA GPU and fleetsim built
# with CUDA (scripts/gpu-build.sh there, or `fleetsim`, `libfleetsim_cuda.so` and `tests/fleetsim_gpu_tests` built
# elsewhere with -DFLEETSIM_MPI=OFF and brought along):
#   1. the GPU tests (tests/gpu_test.cpp), which must run, not skip;
#   2. fleetsim calibrate --backend cuda: the fitted profile;
#   3. fleetsim run --backend cuda on scenarios/gpu-validate.json with the catalog's figures, and fleetsim validate
#      with the fitted profile (three real runs, errors against each task's median);
#   4. scripts/gpu-kernel-probe.py: kernels timed through PyTorch at the shapes of FLUX, Llama 3 70B on TP 8 and the
#      SDXL UNet, for `fleetsim kernels --measured` (where python3 has PyTorch with CUDA; FLEETSIM_GPU_PROBE=0 skips it).
# Everything goes to OUT_DIR, and OUT_DIR.tar.gz holds it all. Missing CUDA libraries (cuBLAS, NCCL) are looked for
# under /usr/local/cuda*, /opt, /usr/lib and Python's nvidia packages. Run and validate use the node type the
# calibration names (one with this GPU type), keeping the scenario's one GPU.
# Usage: bash scripts/gpu-validate.sh [BUILD_DIR (build-gpu)] [OUT_DIR (gpu-results)], relative paths from the
# repository's root.
set -u
cd "$(dirname "$0")/.."
build=$(cd "${1:-build-gpu}" 2>/dev/null && pwd) || { echo "gpu-validate: no build folder ${1:-build-gpu}" >&2; exit 2; }
out=${2:-gpu-results}
mkdir -p "$out"
status=0
step() { echo "== $* ($(date -u +%H:%M:%S))"; }
fail() { echo "gpu-validate: $*" >&2; [ "$status" -ne 0 ] || status=1; }

step "the machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  uname -srm
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 || true
} | tee "$out/machine.txt"

# The loader finds what the build linked, or these: the CUDA toolkit's first, then Python's nvidia packages.
if ldd "$build/libfleetsim_cuda.so" | grep -q "not found"; then
  python_nvidia=$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null || true)
  dirs=$(find -H /usr/local/cuda* /opt /usr/lib /usr/local/lib $python_nvidia \
           \( -name 'libcudart.so.1*' -o -name 'libcublas.so.1*' -o -name 'libcublasLt.so.1*' -o -name 'libnccl.so.2' \) \
           -printf '%h\n' 2>/dev/null | awk '!seen[$0]++' | paste -sd:)
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" | tee -a "$out/machine.txt"
fi
ldd "$build/libfleetsim_cuda.so" | grep -E "cudart|cublas|nccl|not found" | tee -a "$out/machine.txt"
export FLEETSIM_CUDA_BACKEND=$build/libfleetsim_cuda.so FLEETSIM_SOURCE_DIR=$PWD
# The GPU's clocks, power and temperature through it all, every 100 ms (and why clocks are held down, where the
# driver names that field).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 > "$out/clocks.csv" 2>&1 &
sampler=$!
nvidia-smi --query-gpu=timestamp,clocks_event_reasons.active --format=csv -lms 100 > "$out/clock-reasons.csv" 2>&1 &
reasons=$!
trap 'kill "$sampler" "$reasons" 2>/dev/null' EXIT

step "1. the GPU tests"
timeout 120 "$build/tests/fleetsim_gpu_tests" --durations yes 2>&1 | tee "$out/gpu-tests.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || fail "the GPU tests exited $rc (77: skipped, no device)"

step "2. fleetsim calibrate --backend cuda"
timeout 120 "$build/fleetsim" calibrate --backend cuda --out "$out/profile.json" 2>&1 | tee "$out/calibrate.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "calibrate --backend cuda failed"

step "3. run on scenarios/gpu-validate.json with the catalog's figures, validate with the profile"
node=$(grep -o '"node type": "[^"]*"' "$out/profile.json" 2>/dev/null | cut -d'"' -f4 || true)
on_node=()
[ -z "$node" ] || [ "$node" = none ] || on_node=(--set "/cluster/nodes/0/type=$node")
timeout 60 "$build/fleetsim" run scenarios/gpu-validate.json --backend cuda "${on_node[@]}" --out "$out/run-catalog" 2>&1 | tee "$out/run-catalog.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "run --backend cuda failed"
if [ -f "$out/profile.json" ]; then
  timeout 60 "$build/fleetsim" validate scenarios/gpu-validate.json --backend cuda --profile "$out/profile.json" "${on_node[@]}" \
    --repeat 3 --out "$out/validate-profile" 2>&1 | tee "$out/validate-profile.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "validate --backend cuda failed"
fi

step "4. the kernel probe"
if [ "${FLEETSIM_GPU_PROBE:-1}" = 0 ]; then
  echo "FLEETSIM_GPU_PROBE=0: the kernel probe was not asked for" | tee "$out/probe.log"
elif python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  mkdir -p "$out/probe"
  PYTHONUNBUFFERED=1 timeout 180 python3 scripts/gpu-kernel-probe.py "$out/probe" 2>&1 | tee "$out/probe.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "the kernel probe failed"
else
  echo "no PyTorch with CUDA here: the kernel probe did not run" | tee "$out/probe.log"
fi

step "done"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$out/machine.txt"
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
exit "$status"
