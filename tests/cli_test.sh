#!/usr/bin/env bash
# The fleetsim command as a user meets it: exit codes, messages naming file and field, no partial
# output on bad input, identical output for one seed.
set -u
fleetsim=$1
src=$2
plugin=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}

"$fleetsim" catalog >"$tmp/catalog.txt"
check "catalog lists the H100" grep -q "h100-sxm" "$tmp/catalog.txt"
"$fleetsim" catalog --json >"$tmp/catalog.json"
check "catalog --json carries sources" grep -q '"source"' "$tmp/catalog.json"

"$fleetsim" simulate "$src/scenarios/default.json" >"$tmp/summary.txt"
check "simulate exits 0" test $? -eq 0
check "simulate prints a summary" grep -q "completed" "$tmp/summary.txt"

"$fleetsim" simulate "$src/scenarios/default.json" --json --out "$tmp/run1" >"$tmp/a.json"
"$fleetsim" simulate "$src/scenarios/default.json" --json --out "$tmp/run2" >"$tmp/b.json"
check "--json has makespan_s" grep -q '"makespan_s"' "$tmp/a.json"
check "same seed, same summary" cmp -s "$tmp/a.json" "$tmp/b.json"
check "same seed, same trace" cmp -s "$tmp/run1/trace.csv" "$tmp/run2/trace.csv"
check "same seed, same report" cmp -s "$tmp/run1/report.html" "$tmp/run2/report.html"
for chart in gantt utilization queue vram cost latency-cdf links; do
  check "the report has the $chart chart" grep -q "id=\"$chart\"" "$tmp/run1/report.html"
done
"$fleetsim" report "$tmp/run1" --out "$tmp/again.html" >/dev/null
check "report RUN_DIR makes the same report again" cmp -s "$tmp/run1/report.html" "$tmp/again.html"
echo '{"scenario": 5}' >"$tmp/run2/run.json"
"$fleetsim" report "$tmp/run2" 2>"$tmp/report-err.txt"
check "report of a broken run.json exits 2" test $? -eq 2
check "report names the file and field" grep -q "run2/run.json: /scenario: expected a string" "$tmp/report-err.txt"
"$fleetsim" report "$tmp/nowhere" 2>"$tmp/report-err.txt"
check "report of a directory without run.json exits 2" test $? -eq 2
check "--out writes the trace as JSON too" test -s "$tmp/run1/trace.json"
"$fleetsim" simulate "$src/scenarios/default.json" --json --seed 7 >"$tmp/c.json"
check "--seed changes the run" bash -c "! cmp -s '$tmp/a.json' '$tmp/c.json'"

sed 's/"hgx-h100-8"/"hgx-h100-9"/' "$src/scenarios/default.json" >"$src/scenarios/.cli-test-bad.json"
"$fleetsim" simulate "$src/scenarios/.cli-test-bad.json" --out "$tmp/bad" >"$tmp/bad.out" 2>"$tmp/bad.err"
code=$?
rm -f "$src/scenarios/.cli-test-bad.json"
check "bad scenario exits 2" test $code -eq 2
check "bad scenario names the file and field" grep -q '.cli-test-bad.json: /cluster/nodes/0/type: unknown node type "hgx-h100-9"' "$tmp/bad.err"
check "bad scenario writes no output" test ! -e "$tmp/bad"
check "bad scenario prints nothing on stdout" test ! -s "$tmp/bad.out"

"$fleetsim" simulate "$tmp/missing.json" 2>"$tmp/missing.err"
check "missing file exits 2" test $? -eq 2
mkfifo "$tmp/fifo.json"
timeout 20 "$fleetsim" simulate "$tmp/fifo.json" >/dev/null 2>"$tmp/fifo.err"
check "a FIFO is refused, not waited on" test $? -eq 2
check "a FIFO is named as one" grep -q "fifo.json: is not a regular file (a FIFO)" "$tmp/fifo.err"
"$fleetsim" simulate "$tmp" >/dev/null 2>"$tmp/dir.err"
check "a directory is named as one" grep -q ": is a directory, expected a file" "$tmp/dir.err"
"$fleetsim" simulate /dev/zero >/dev/null 2>"$tmp/zero.err"
check "a device is refused" grep -q "/dev/zero: is not a regular file (a device)" "$tmp/zero.err"
"$fleetsim" collective --op all-reduce --cluster "$tmp/no-cluster.json" --gpus 8 >/dev/null 2>"$tmp/nocluster.err"
check "a missing --cluster file is named as missing" grep -q "no-cluster.json: cannot read it: No such file or directory" "$tmp/nocluster.err"
"$fleetsim" compare "$src/scenarios/default.json" --policies "" >/dev/null 2>"$tmp/nopolicies.err"
check "compare --policies \"\" is refused, not read as all" grep -q -- "--policies: expected one or more policy names" "$tmp/nopolicies.err"
"$fleetsim" catalog --json >/dev/full 2>"$tmp/full.err"
check "output to a full disk exits non-zero" test $? -ne 0
check "output to a full disk says so" grep -q "could not write the output to stdout" "$tmp/full.err"
( trap '' XFSZ; ulimit -f 100; "$fleetsim" simulate "$src/scenarios/default.json" --out "$tmp/cut" >/dev/null 2>"$tmp/cut.err" )
check "--out that cannot be written whole fails" grep -q "nothing was written to $tmp/cut: error while writing" "$tmp/cut.err"
check "--out that cannot be written whole leaves nothing" test -z "$(ls -A "$tmp" | grep -e '^cut$' -e partial)"
check "missing file is named" grep -q "missing.json: cannot read it: No such file or directory" "$tmp/missing.err"

"$fleetsim" simulate 2>/dev/null
check "missing argument exits 2" test $? -eq 2
"$fleetsim" simulate "$src/scenarios/default.json" --seed -1 >/dev/null 2>"$tmp/seed.err"
check "a negative seed exits 2" test $? -eq 2
check "a bad seed says the range" grep -q -- "--seed: must be an integer from 0 to 2^64-1" "$tmp/seed.err"
"$fleetsim" simulate "$src/scenarios/default.json" --seed 99999999999999999999 >/dev/null 2>&1
check "a seed beyond 64 bits exits 2, not clamped" test $? -eq 2
"$fleetsim" compare "$src/scenarios/default.json" --seeds 0 >/dev/null 2>"$tmp/seeds.err"
check "compare --seeds 0 says the range in words" grep -qx -- '--seeds: must be an integer from 1 to 100000, found "0"' "$tmp/seeds.err"
"$fleetsim" simulate "$src/scenarios/default.json" --max-events 0 >/dev/null 2>"$tmp/maxev.err"
check "--max-events 0 says the range in words" grep -qx -- '--max-events: must be an integer from 1 to 2^62, found "0"' "$tmp/maxev.err"
scale_driver="$(dirname "$fleetsim")/fleetsim_scale"
if [ -x "$scale_driver" ]; then  # built with bench/ (Google Benchmark found)
  "$scale_driver" --bogus >/dev/null 2>"$tmp/scale.err"
  scale_rc=$?
  check "fleetsim_scale refuses an unknown argument with its usage" bash -c "test $scale_rc -eq 2 && grep -q '^usage: fleetsim_scale' '$tmp/scale.err'"
fi
"$fleetsim" simulat "$src/scenarios/default.json" 2>"$tmp/cmd.err"
check "an unknown command exits 2" test $? -eq 2
check "an unknown command is named, with the commands" grep -q 'unknown command "simulat" (commands: catalog, simulate' "$tmp/cmd.err"
"$fleetsim" simulate "$src/scenarios/comfyui-studio.json" --quiet >/dev/null 2>"$tmp/quiet.err"
check "--quiet after the command silences the import notes" test ! -s "$tmp/quiet.err"
"$fleetsim" -q simulate "$src/scenarios/comfyui/sdxl-hires-fix.json" --cluster hgx-h100-8 >"$tmp/one.txt"
check "a graph on a cluster runs once" grep -q "workflows  1 submitted: 1 completed" "$tmp/one.txt"
check "a graph on a cluster prints each task's breakdown" grep -Eq "^KSampler#3 +n0.g0 .*\(.*s, .*s, .*s\)" "$tmp/one.txt"
"$fleetsim" simulate "$src/scenarios/comfyui/sdxl-hires-fix.json" --cluster hgx-h100-8:0 2>"$tmp/one.err" >/dev/null
check "a bad --cluster count exits 2 and says the form" grep -q "expected NODE_TYPE or NODE_TYPE:COUNT" "$tmp/one.err"
"$fleetsim" simulate "$src/scenarios/comfyui-studio.json" >/dev/null 2>"$tmp/notes.err"
check "a scenario's ComfyUI graph says what it assumed" grep -q "KSampler#3: sdxl-unet, 30 steps, 1024x1024" "$tmp/notes.err"
"$fleetsim" --help >/dev/null
check "--help exits 0" test $? -eq 0

"$fleetsim" collective --op all-reduce --cluster hgx-h100-8 --gpus 8 --algo ring -b 1M -e 1G -f 1024 >"$tmp/coll.txt"
check "collective prints an nccl-tests-style table" grep -q "busbw" "$tmp/coll.txt"
check "collective prints one row per size" test "$(grep -vc '^#' "$tmp/coll.txt")" -eq 2
"$fleetsim" collective --op all-reduce --cluster hgx-h100-8 --gpus 8 -b 1M -e 1G -f 1.0000000001 >"$tmp/coll-f.txt" 2>"$tmp/coll-f.err"
coll_f_rc=$?
check "collective refuses a factor that would plan 10^11 sizes, saying the limit" \
  bash -c "test $coll_f_rc -eq 2 && grep -q -- '--factor: expected at most 10,000 sizes between --min and --max' '$tmp/coll-f.err' && test ! -s '$tmp/coll-f.txt'"
"$fleetsim" collective --op all-reduce --cluster hgx-h100-9 --gpus 8 2>"$tmp/coll.err"
check "collective on an unknown node type exits 2" test $? -eq 2
check "collective names the unknown node type" grep -q 'unknown node type "hgx-h100-9"' "$tmp/coll.err"
"$fleetsim" collective --op all-reduce --cluster l40s-pcie-8 --gpus 8 --algo nvls 2>/dev/null
check "nvls on a PCIe box exits 2" test $? -eq 2

"$fleetsim" simulate "$src/scenarios/llm-training.json" --json >"$tmp/ndr.json"
"$fleetsim" simulate "$src/scenarios/llm-training.json" --json --set /cluster/nodes/0/node_overrides/nic=ib-hdr >"$tmp/hdr.json"
check "--set changes the scenario" bash -c "! cmp -s '$tmp/ndr.json' '$tmp/hdr.json'"
"$fleetsim" simulate "$src/scenarios/llm-training.json" --set /cluster/nodes/0/node_overrides/nic=ib-qdr 2>"$tmp/set.err"
check "--set values are checked like the file" grep -q "unknown link type \"ib-qdr\"" "$tmp/set.err"

"$fleetsim" policies --json >"$tmp/policies.json"
check "policies --json lists memory-aware" grep -q '"memory-aware"' "$tmp/policies.json"
"$fleetsim" compare "$src/scenarios/default.json" --policies fifo,memory-aware --seeds 2 --out "$tmp/cmp" >"$tmp/cmp.txt"
check "compare prints one column per policy" grep -q "memory-aware" "$tmp/cmp.txt"
check "compare writes one CSV row per run" test "$(wc -l <"$tmp/cmp/comparison.csv")" -eq 5
"$fleetsim" compare "$src/scenarios/trace-replay.json" --policies fifo,las >/dev/null 2>"$tmp/replay.err"
check "compare notes a replay runs once per policy" grep -q "draws nothing at random" "$tmp/replay.err"
"$fleetsim" --quiet compare "$src/scenarios/trace-replay.json" --policies fifo,las >/dev/null 2>"$tmp/replay-quiet.err"
check "--quiet leaves the note out" test ! -s "$tmp/replay-quiet.err"
"$fleetsim" compare "$src/scenarios/default.json" --policies fifo,best 2>"$tmp/cmp.err"
check "compare with an unknown policy exits 2" test $? -eq 2

"$fleetsim" simulate "$src/scenarios/default.json" --policy-plugin "$plugin" --set /policy/name=largest-first --json >"$tmp/plugin.json"
check "a policy plugin runs" grep -q '"policy": "largest-first"' "$tmp/plugin.json"
"$fleetsim" compare "$src/scenarios/default.json" --policy-plugin "$plugin" --policies fifo,largest-first --seeds 1 >"$tmp/plugin-cmp.txt"
check "compare runs a plugin policy" grep -q "largest-first" "$tmp/plugin-cmp.txt"
"$fleetsim" simulate "$src/scenarios/default.json" --policy-plugin "$tmp/none.so" 2>"$tmp/plugin.err"
check "a missing plugin exits 2" test $? -eq 2
check "a missing plugin is named" grep -q "none.so: cannot load the policy plugin" "$tmp/plugin.err"
"$fleetsim" simulate "$src/scenarios/default.json" --policy-plugin "$plugin" --policy-plugin "$plugin" 2>"$tmp/plugin2.err"
check "a policy registered twice is refused" grep -q 'already registered' "$tmp/plugin2.err"

# Real execution on the CPU backend.
"$fleetsim" run "$src/scenarios/cpu-validate.json" --dry-run >"$tmp/schedule.txt"
check "run --dry-run prints each device's schedule" grep -q "n0.g1 (6 tasks)" "$tmp/schedule.txt"
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 0.05 --out "$tmp/real" >"$tmp/real.txt"
check "run exits 0" test $? -eq 0
check "run compares predicted with measured" grep -q "makespan            predicted" "$tmp/real.txt"
check "run writes the measured trace" test "$(wc -l <"$tmp/real/trace.csv")" -eq 16
check "run writes one error row per task" test "$(wc -l <"$tmp/real/task_errors.csv")" -eq 16
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 0 2>"$tmp/scale.err"
check "run --work-scale 0 exits 2" test $? -eq 2
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 1e300 >/dev/null 2>"$tmp/scale.err"
check "run --work-scale 1e300 exits 2" test $? -eq 2
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 1e-300 >"$tmp/tiny.txt" 2>&1
check "run --work-scale 1e-300 says its errors mean little" bash -c "test $? -eq 0 && grep -q 'note: the median task is predicted to run for .*raise --work-scale (it is 1e-300)' '$tmp/tiny.txt'"
check "run --work-scale 0.05 has no such note" bash -c "! grep -q 'note: the median task is predicted' '$tmp/real.txt'"
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 0.05 --max-seconds nan >/dev/null 2>"$tmp/maxs.err"
check "run --max-seconds nan exits 2 naming it" bash -c "test $? -eq 2 && grep -q -- '--max-seconds: expected a positive number' '$tmp/maxs.err'"
"$fleetsim" run "$src/scenarios/default.json" 2>"$tmp/big.err"
check "run refuses hours of work and says how to shrink it" grep -q "run it with --work-scale" "$tmp/big.err"
"$fleetsim" run "$src/scenarios/cpu-validate.json" --work-scale 0.05 --backend cuda >"$tmp/cuda.txt" 2>"$tmp/cuda.err"
cuda_rc=$?
if [ "$cuda_rc" -eq 0 ]; then  # a GPU machine with the CUDA backend built
  check "run --backend cuda compares predicted with measured" grep -q "makespan            predicted" "$tmp/cuda.txt"
else
  check "run --backend cuda exits 1 and says why it cannot run here" \
    bash -c "test $cuda_rc -eq 1 && grep -q 'the CUDA backend cannot run here' '$tmp/cuda.err'"
fi
if [ -f "$(dirname "$fleetsim")/libfleetsim_cuda.so" ]; then  # built with CUDA: the backend's library must open
  check "the CUDA backend's library opens (its fleetsim symbols all resolve against the binary)" \
    bash -c "! grep -q 'cannot open the CUDA backend' '$tmp/cuda.err'"
fi
check "fleetsim itself loads no CUDA library (only the CUDA backend's library does)" \
  bash -c "! ldd '$fleetsim' | grep -q 'libcudart\|libcublas\|libnccl'"

# Calibration, then validation with the profile it wrote.
"$fleetsim" calibrate --repeats 1 --out "$tmp/prof/cpu.json" >"$tmp/cal.txt"
check "calibrate exits 0" test $? -eq 0
check "calibrate fits the cpu-core device" grep -q "cpu-core: fp64" "$tmp/cal.txt"
check "calibrate measures one worker streaming alone and beside GEMMs" bash -c "grep -q '^stream-alone' '$tmp/cal.txt' && grep -q '^stream-beside-gemm' '$tmp/cal.txt'"
check "calibrate measures one worker's GEMM alone and beside streams" bash -c "grep -q '^gemm-alone' '$tmp/cal.txt' && grep -q '^gemm-beside-stream' '$tmp/cal.txt' && grep -q 'one worker.s fp32 GEMM alone' '$tmp/cal.txt'"
if [ "$(nproc)" -gt 1 ]; then
  check "calibrate on several workers writes the memory bandwidth they share" grep -q '"shared_memory_bandwidth"' "$tmp/prof/cpu.json"
  check "calibrate on several workers writes the compute they share" grep -q '"compute_pool"' "$tmp/prof/cpu.json"
fi
check "calibrate writes a profile with provenance" grep -q '"provenance"' "$tmp/prof/cpu.json"
"$fleetsim" validate "$src/scenarios/cpu-validate.json" --profile "$tmp/prof/cpu.json" --work-scale 0.05 --out "$tmp/val" >"$tmp/val.txt"
check "validate exits 0" test $? -eq 0
"$fleetsim" --quiet validate "$src/scenarios/cpu-validate.json" --profile "$tmp/prof/cpu.json" --work-scale 0.05 --out "$tmp/val2" --json >"$tmp/val.json"
check "validate --json has the makespan error" grep -q '"makespan_error"' "$tmp/val.json"
check "validate measures its profile's rates again before and after the runs" \
  bash -c "grep -q '^machine now *against the profile: before the runs / after them' '$tmp/val.txt' && grep -q 'fp32 GEMM' '$tmp/val.txt' && grep -q '\"profile_check\"' '$tmp/val.json'"
"$fleetsim" validate "$src/scenarios/cpu-validate.json" --profile "$tmp/prof/cpu.json" --work-scale 0.05 --repeat 3 >"$tmp/val3.txt"
check "validate --repeat 3 compares with the median of three runs and states their noise" \
  grep -q "measured            the median of 3 runs; run-to-run noise: task median" "$tmp/val3.txt"
"$fleetsim" --quiet calibrate --repeats 1 --json >"$tmp/cal.json"
check "calibrate --json prints a profile" grep -q '"fleetsim_profile"' "$tmp/cal.json"
"$fleetsim" import trace --format philly "$src/tests/data/philly-sample.json" --out "$tmp/philly.csv" >"$tmp/philly.txt" 2>"$tmp/philly.err"
check "import trace writes the kept jobs" grep -q "wrote 3 jobs" "$tmp/philly.txt"
check "import trace says what it dropped" grep -q "dropped 2: no attempt with a start and an end time" "$tmp/philly.err"
check "import trace writes the CSV header" grep -qx "submit_time,tenant,gpus,duration" "$tmp/philly.csv"
"$fleetsim" import trace --format philly "$src/tests/data/philly-sample.json" --to "1 h" --min-gpus 2 --tenants vc-a,vc-b >"$tmp/philly-window.csv" 2>"$tmp/philly-window.err"
check "import trace keeps a window" test "$(grep -c , "$tmp/philly-window.csv")" -eq 3
check "import trace says what it filtered out" grep -q "filtered out 1: submitted after the window" "$tmp/philly-window.err"
"$fleetsim" import trace --format philly "$src/tests/data/philly-sample.json" --from "100 d" --out "$tmp/empty.csv" >/dev/null 2>"$tmp/empty.err"
check "import trace with an empty window exits 2 and writes nothing" bash -c "test $? -eq 2 && test ! -e '$tmp/empty.csv' && grep -q 'no job was kept (check --from' '$tmp/empty.err'"
printf 'id,gpu_num,submit_time,duration\n1,4,2020-07-01 08:00:00,60\n2,1,2020-07-01 08:10:00,5\n' >"$tmp/jobs-log.csv"
"$fleetsim" --quiet import trace --format csv "$tmp/jobs-log.csv" --columns submit=submit_time,gpus=gpu_num,duration=duration >"$tmp/generic.csv"
check "import trace reads a job CSV through a column mapping" grep -qx "600,1,5" "$tmp/generic.csv"
"$fleetsim" import trace --format helios "$src/tests/data/job-logs/helios-sample.csv" --out "$tmp/helios.csv" 2>"$tmp/helios.err"
check "import trace reads a named log's columns" grep -qx "60,vcA,8,3600" "$tmp/helios.csv"
check "import trace counts the kept jobs by status" grep -q "kept by final status: COMPLETED 1, FAILED 1" "$tmp/helios.err"
"$fleetsim" import trace --format csv "$tmp/jobs-log.csv" >/dev/null 2>"$tmp/generic.err"
check "import trace --format csv asks for --columns" grep -q "needs --columns" "$tmp/generic.err"
"$fleetsim" import trace --format philly "$src/tests/data/philly-sample.json" --from soon >/dev/null 2>"$tmp/from.err"
check "import trace names a bad --from" grep -q -- "--from" "$tmp/from.err"
"$fleetsim" import trace --format alibaba "$src/tests/data/philly-sample.json" >/dev/null 2>&1
check "import trace refuses an unknown format" test $? -ne 0
cat >"$tmp/hunyuan.json" <<'EOF'
{"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "hunyuan_video_t2v_720p_fp8_e4m3fn.safetensors"}},
 "2": {"class_type": "VAELoader", "inputs": {"vae_name": "hunyuan_video_vae_bf16.safetensors"}},
 "3": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 848, "height": 480, "length": 33, "batch_size": 1}},
 "4": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["3", 0], "steps": 30, "cfg": 1}},
 "5": {"class_type": "VAEDecode", "inputs": {"samples": ["4", 0], "vae": ["2", 0]}}}
EOF
"$fleetsim" import comfyui "$tmp/hunyuan.json" --gpu rtx-4090 >/dev/null 2>"$tmp/hunyuan-4090.err"
check "import comfyui --gpu: a decode the GPU cannot hold falls back to tiles, said" grep -q "past rtx-4090's 24 GB" "$tmp/hunyuan-4090.err"
"$fleetsim" import comfyui "$tmp/hunyuan.json" --gpu nope >/dev/null 2>"$tmp/hunyuan-nope.err"
check "import comfyui --gpu names the GPU types it knows" bash -c "test $? -eq 2 && grep -q -- '--gpu: unknown GPU type \"nope\" (expected one of' '$tmp/hunyuan-nope.err'"
"$fleetsim" import comfyui "$tmp/hunyuan.json" --attention cudnn >"$tmp/hunyuan-cudnn.json" 2>/dev/null
check "import comfyui --attention cudnn writes the backend into each model step" grep -q '"attention": "cudnn"' "$tmp/hunyuan-cudnn.json"
"$fleetsim" import comfyui "$tmp/hunyuan.json" --attention fa3 >/dev/null 2>"$tmp/hunyuan-fa3.err"
check "import comfyui --attention names the backends it knows" bash -c "test $? -eq 2 && grep -q 'expected flash2 or cudnn' '$tmp/hunyuan-fa3.err'"
"$fleetsim" import nccl-tests "$src/tests/data/nccl-tests/all_reduce_8ranks.log" --node-type hgx-h100-8 --json >"$tmp/nccl.json"
check "import nccl-tests --json prints a profile" grep -q '"fleetsim_profile"' "$tmp/nccl.json"
check "validate prints the error table" grep -q "task error          median" "$tmp/val.txt"
check "validate writes a scatter chart with one point per task" test "$(grep -c '<circle class="mark"' "$tmp/val/scatter.svg")" -eq 15
check "validate writes its HTML report" grep -q 'id="scatter"' "$tmp/val/report.html"
"$fleetsim" validate "$src/scenarios/cpu-validate.json" 2>"$tmp/noprof.err"
check "validate needs a profile" test $? -eq 2
echo '{"fleetsim_profile": 1, "provenance": {}, "gpus": {"cpu-core": {"launch_overhead": "soon"}}}' >"$tmp/bad-profile.json"
"$fleetsim" simulate "$src/scenarios/cpu-validate.json" --profile "$tmp/bad-profile.json" >"$tmp/badprof.out" 2>"$tmp/badprof.err"
check "a malformed profile is refused with its field named" grep -q "bad-profile.json: /gpus/cpu-core/launch_overhead" "$tmp/badprof.err"
check "a malformed profile prints nothing on stdout" test ! -s "$tmp/badprof.out"
"$fleetsim" calibrate --backend tpu 2>"$tmp/tpu.err"
check "calibrate --backend tpu exits 2" test $? -eq 2
"$fleetsim" calibrate --gpu-type h100-sxm 2>"$tmp/cpugpu.err"
check "calibrate --gpu-type on the CPU backend exits 2" test $? -eq 2
if [ "$cuda_rc" -ne 0 ]; then  # no GPU here: scripts/gpu-build.sh runs the CUDA calibration where there is one
  "$fleetsim" calibrate --backend cuda --repeats 1 >"$tmp/calcuda.txt" 2>"$tmp/calcuda.err"
  calcuda_rc=$?
  check "calibrate --backend cuda exits 1 and says why it cannot run here" \
    bash -c "test $calcuda_rc -eq 1 && grep -q 'calibration on the CUDA backend cannot run here' '$tmp/calcuda.err'"
  check "calibrate --backend cuda prints nothing on stdout where it cannot run" test ! -s "$tmp/calcuda.txt"
fi

# Outside measurements: an nccl-tests log becomes a profile that collective and simulate accept.
"$fleetsim" import nccl-tests "$src/tests/data/nccl-tests/all_reduce_8ranks.log" --node-type hgx-h100-8 --algo ring --out "$tmp/nccl.json" >"$tmp/nccl.txt"
check "import nccl-tests exits 0" test $? -eq 0
check "import nccl-tests names the fitted link" grep -q "fitted nvlink4: collective latency x" "$tmp/nccl.txt"
"$fleetsim" collective --op all-reduce --cluster hgx-h100-8 --gpus 8 --algo ring -b 32M -e 32M --profile "$tmp/nccl.json" >"$tmp/ncclcoll.txt"
check "collective --profile gives back the log's bus bandwidth" grep -qE "33554432 .* 300\.(4|5)[0-9]$" "$tmp/ncclcoll.txt"
"$fleetsim" import nccl-tests "$src/tests/data/nccl-tests/all_reduce_8ranks.log" --node-type hgx-h100-8 >"$tmp/ncclauto.txt"
check "import nccl-tests fits NCCL's own choice by default" grep -q "fitted nvlink4" "$tmp/ncclauto.txt"
# Predictions beside a log's measured rows.
"$fleetsim" collective --cluster hgx-h100-8 --measured "$src/tests/data/nccl-tests/all_reduce_8ranks.log" >"$tmp/measured.txt"
check "collective --measured exits 0" test $? -eq 0
check "collective --measured prints a row per measured size" test "$(grep -vc '^#' "$tmp/measured.txt")" -eq 11
check "collective --measured prints the median error" grep -q "^# median |error| [0-9.]*% over 11 sizes" "$tmp/measured.txt"
"$fleetsim" collective --cluster hgx-h100-8 --gpus 4 --measured "$src/tests/data/nccl-tests/all_reduce_8ranks.log" 2>"$tmp/measured.err"
check "collective --measured refuses a rank count other than the log's" bash -c "test $? -eq 2 && grep -q 'ran on 8' '$tmp/measured.err'"
printf 'bytes,time_us\n1048576,30\n1048576,31\n' >"$tmp/twice.csv"
"$fleetsim" collective --cluster hgx-h100-8 --measured "$tmp/twice.csv" 2>"$tmp/twice.err"
check "collective --measured refuses a size measured twice" bash -c "test $? -eq 2 && grep -q 'appears twice' '$tmp/twice.err'"

# Capacity planning on the shipped plan.
"$fleetsim" plan "$src/scenarios/plans/comfyui-studio.json" --out "$tmp/plan" >"$tmp/plan.txt"
check "plan exits 0" test $? -eq 0
check "plan recommends a cluster at every load" test "$(grep -c '^load .* a month$' "$tmp/plan.txt")" -eq 3
check "plan prints the frontiers" grep -q "Pareto frontier at load 2x" "$tmp/plan.txt"
check "plan writes the chart" grep -q 'id="frontier"' "$tmp/plan/plan.html"
check "plan writes one CSV row per point" test "$(wc -l <"$tmp/plan/plan.csv")" -eq "$(grep -c '"load"' "$tmp/plan/plan.json" | awk '{print $1 - 3 + 1}')"
echo '{"base": "../comfyui-studio.json", "search": {"node_types": ["hgx-h100-8"], "nodes": {"min": 2, "max": 1}}}' >"$tmp/bad-plan.json"
"$fleetsim" plan "$tmp/bad-plan.json" >"$tmp/badplan.out" 2>"$tmp/badplan.err"
check "a bad plan exits 2 naming the field" grep -q "bad-plan.json: /search/nodes/max" "$tmp/badplan.err"

# A training iteration and a sweep.
"$fleetsim" train "$src/scenarios/training/gpt-13b-hybrid.json" >"$tmp/train.txt"
check "train exits 0" test $? -eq 0
check "train prints each stage's memory" test "$(grep -cE '^ +[0-3] +10 ' "$tmp/train.txt")" -eq 4
for job in "$src"/scenarios/training/*.json; do
  "$fleetsim" train "$job" >/dev/null 2>"$tmp/job.err"
  check "train runs the shipped job $(basename "$job") (exit 0)" test $? -eq 0
done
"$fleetsim" train "$src/scenarios/training/dp-1.3b.json" --sweep dp=1,8 >"$tmp/sweep.txt"
check "train --sweep prints one row per value" test "$(wc -l <"$tmp/sweep.txt")" -eq 3
"$fleetsim" train "$src/scenarios/training/dp-1.3b.json" --sweep dp=1,x 2>"$tmp/sweep.err"
check "train --sweep refuses a bad value" test $? -eq 2
"$fleetsim" train "$src/scenarios/training/llama-3-70b-fsdp-a100.json" --sweep recompute_layers=40,80 >"$tmp/sweep-layers.txt"
check "train --sweep recompute_layers trades memory for time, a row per value" \
  bash -c "test $? -eq 0 && test \$(wc -l <'$tmp/sweep-layers.txt') -eq 3 && grep -qE '^40 +64 ' '$tmp/sweep-layers.txt' && grep -qE '^80 +64 ' '$tmp/sweep-layers.txt'"
# A configuration that does not fit its GPUs is shown, then refused with the stage and what it lacks.
printf '%s' '{"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
  "parallel": {"dp": 8, "distributed_optimizer": true}, "batch": {"global": 8}, "recompute": "selective"}' >"$tmp/oom.json"
"$fleetsim" train "$tmp/oom.json" >"$tmp/oom.txt" 2>"$tmp/oom.err"
check "train refuses a configuration that does not fit (exit 2, stage and bytes)" bash -c "test $? -eq 2 && grep -q 'DOES NOT FIT' '$tmp/oom.txt' && grep -q '/parallel: stage 0 needs 82.8 GB a GPU' '$tmp/oom.err'"
"$fleetsim" train "$src/scenarios/training/gpt2-10b-zero-offload-v100.json" >"$tmp/offload.txt"
check "train with the optimizer on the CPU fits a 10 B model on one 32 GB V100 and times the offload" \
  bash -c "test $? -eq 0 && grep -q '^offload  .*DeepSpeed.s CPU-Adam.*CPU step' '$tmp/offload.txt' && grep -q 'largest per-GPU need 25.8 GB of 32 GB$' '$tmp/offload.txt'"
cat >"$tmp/host-oom.json" <<'JOB'
{"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
 "model": {"layers": 96, "hidden": 12288, "heads": 96, "vocab": 51200, "seq_len": 2048},
 "parallel": {"tp": 8, "zero": 1}, "batch": {"global": 1}, "recompute": "full",
 "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}}
JOB
"$fleetsim" train "$tmp/host-oom.json" >/dev/null 2>"$tmp/host-oom.err"
check "train refuses an offloaded optimizer its node's host memory cannot hold (exit 2, the bytes)" \
  bash -c "test $? -eq 2 && grep -q '/optimizer/offload: a node of stage 0 needs 2.79 TB of host memory' '$tmp/host-oom.err'"
"$fleetsim" train "$src/scenarios/training/dp-1.3b.json" --sweep micro=3 >/dev/null 2>"$tmp/sweep.err"
check "train --sweep with a value that breaks a rule blames --sweep, not the job file" \
  bash -c "test $? -eq 2 && grep -q -- '--sweep: micro=3: expected a multiple of dp x micro (3), found 8 (at /batch/global)' '$tmp/sweep.err'"
"$fleetsim" train "$tmp/oom.json" --search --top 3 >"$tmp/search.txt"
check "train --search ranks the configurations that fit" bash -c "test $? -eq 0 && grep -q 'configurations in' '$tmp/search.txt' && test \$(grep -cE '^ +[1-3]  TP' '$tmp/search.txt') -eq 3"
"$fleetsim" train "$tmp/oom.json" --json >"$tmp/oom-json.json" 2>/dev/null
check "train --json says out_of_memory" bash -c "test $? -eq 2 && grep -q '\"stage\": 0' '$tmp/oom-json.json'"

# Numbers that are not numbers, or too large to mean anything, are refused at the option.
"$fleetsim" collective --cluster hgx-h100-8 --gpus 8 -b "$(printf '9%.0s' $(seq 400))" >/dev/null 2>"$tmp/digits.err"
check "collective -b with 400 digits exits 2 naming --min" bash -c "test $? -eq 2 && grep -q -- '--min: expected a whole number of bytes from 1 to 1e18' '$tmp/digits.err'"
"$fleetsim" collective --cluster hgx-h100-8 --gpus 8 --algo ring -b 1e9 -e 1e9 >"$tmp/bare.txt"
check "collective -b 1e9 reads a bare number as bytes, as -b 8 does" bash -c "test $? -eq 0 && grep -qE '^ +1000000000 ' '$tmp/bare.txt'"
"$fleetsim" collective --cluster hgx-h100-8 --gpus 8 -e 1e300B >/dev/null 2>"$tmp/huge.err"
check "collective -e 1e300B exits 2 naming --max" bash -c "test $? -eq 2 && grep -q -- '--max: expected a size from 1 B up to 1 EB' '$tmp/huge.err'"
"$fleetsim" collective --cluster hgx-h100-8 --gpus 800000 >/dev/null 2>"$tmp/ranks.err"
check "collective over 800,000 ranks is refused before any cluster is built" bash -c "test $? -eq 2 && grep -q -- '--gpus: expected at most 16,384 ranks' '$tmp/ranks.err'"
"$fleetsim" kernels --gpu h100-sxm --gemm inf,4096,4096 >/dev/null 2>"$tmp/gemm.err"
check "kernels --gemm inf exits 2" test $? -eq 2

"$fleetsim" simulate "$src/scenarios/default.json" >/dev/null 2>"$tmp/borrowed.err"
check "simulate says which GPUs run on borrowed kernel constants" grep -q "note: model steps on l40s (ada): Ampere's GEMM" "$tmp/borrowed.err"

# One step of a model as each runtime runs it: every operation with its kernels, dtypes, bytes, time and source.
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --runtime comfyui >"$tmp/flux-comfy.txt"
check "kernels --model names how the runtime holds the projections" grep -q "^  projections (fused): comfy/ldm/flux/layers.py" "$tmp/flux-comfy.txt"
check "kernels --model lists each operation with its dtypes and source" bash -c "grep -q '^rms_norm  *pow(x, 2)  *activation  *fp32 -> fp32' '$tmp/flux-comfy.txt' && grep -q 'rope: comfy/ldm/flux/math.py' '$tmp/flux-comfy.txt'"
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --runtime diffusers --json >"$tmp/flux-diffusers.json"
check "kernels --model --json carries the operations" grep -q '"source": "diffusers models/embeddings.py apply_rotary_emb' "$tmp/flux-diffusers.json"
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --runtime eager >/dev/null 2>"$tmp/runtime.err"
check "kernels --runtime names the runtimes it knows" bash -c "test $? -eq 2 && grep -q 'expected comfyui, diffusers, compiled or hunyuanvideo' '$tmp/runtime.err'"
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --runtime hunyuanvideo >/dev/null 2>"$tmp/own.err"
check "kernels --runtime hunyuanvideo runs HunyuanVideo's VAE decoder only" bash -c "test $? -eq 2 && grep -q 'it runs conv3d-vae-decoder, not flux-dit' '$tmp/own.err'"
# Attention on cuDNN's kernels: Hopper's own constants; elsewhere FlashAttention-2's, said beside the step.
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --attention cudnn >"$tmp/flux-cudnn.txt"
check "kernels --attention cudnn says whose kernels run the attention" bash -c "grep -q '; comfyui, cuDNN attention$' '$tmp/flux-cudnn.txt' && grep -q \"hopper's cudnn_attention in models/kernels.json\" '$tmp/flux-cudnn.txt'"
"$fleetsim" kernels --gpu a100-sxm-80gb --model flux-dit --shape width=1024,height=1024 --attention cudnn >"$tmp/flux-cudnn-a100.txt"
check "kernels --attention cudnn on a GPU without cuDNN constants says what stands in" grep -q "assumed: cuDNN attention was not measured on ampere GPUs: FlashAttention-2's constants stand in" "$tmp/flux-cudnn-a100.txt"
"$fleetsim" kernels --gpu h100-sxm --model flux-dit --shape width=1024,height=1024 --attention fa3 >/dev/null 2>"$tmp/attention.err"
check "kernels --attention names the backends it knows" bash -c "test $? -eq 2 && grep -q 'expected flash2 or cudnn, found \"fa3\"' '$tmp/attention.err'"
# A video VAE's decode in tiles: every frame in each tile unless tile_frames says; an image VAE's in three passes,
# without frames; not the video stand-in's; whole numbers.
"$fleetsim" kernels --gpu h100-sxm --model hunyuan-video-vae-decoder --shape width=512,height=512,frames=33,tile=32,tile_overlap=8 --json >"$tmp/vae-tiles.json"
check "kernels --shape tile= decodes in tiles of every frame" bash -c "tr -d ' \\n' < '$tmp/vae-tiles.json' | grep -q '\"tiles\":{\"size\":32.0,\"overlap\":8.0,\"frames\":100000.0,\"frame_overlap\":0.0}'"
"$fleetsim" kernels --gpu h100-sxm --model sd-vae-decoder --shape width=1024,height=1024,tile=64,tile_overlap=8 >"$tmp/image-tiles.txt"
check "kernels --shape tile= on an image VAE decodes in three passes of tiles" grep -q 'in three passes of tiles of 64 latent pixels (overlap 8)' "$tmp/image-tiles.txt"
"$fleetsim" kernels --gpu h100-sxm --model sd-vae-decoder --shape width=512,height=512,tile=32,tile_frames=4 >/dev/null 2>"$tmp/tiles.err"
check "kernels --shape tile_frames= on an image VAE is refused by key" bash -c "test $? -eq 2 && grep -q 'tile_frames: a 2D VAE decodes each frame as an image' '$tmp/tiles.err'"
"$fleetsim" kernels --gpu h100-sxm --model wan21-vae-decoder --shape width=512,height=512,frames=33,tile=32 >"$tmp/wan-tiles.txt"
check "kernels --shape tile= on Wan's causal VAE decodes in tiles" grep -q 'tiles of 32 latent pixels' "$tmp/wan-tiles.txt"
"$fleetsim" kernels --gpu h100-sxm --model video-vae-decoder --shape width=512,height=512,tile=32 >/dev/null 2>"$tmp/tiles.err"
check "kernels --shape tile= on the video stand-in is refused by key" bash -c "test $? -eq 2 && grep -q 'tile: tiles cut the decode of a 2D image VAE' '$tmp/tiles.err' && grep -q 'standing in for a video VAE' '$tmp/tiles.err'"
"$fleetsim" kernels --gpu h100-sxm --model hunyuan-video-vae-decoder --shape width=512,height=512,tile=32,tile_overlap=32 >/dev/null 2>"$tmp/tiles.err"
check "kernels --shape tile_overlap= as large as the tile is refused" bash -c "test $? -eq 2 && grep -q 'tile_overlap: expected fewer latent pixels' '$tmp/tiles.err'"

# One GPU's share of a parallel step, checked as a workflow's "parallel" is.
"$fleetsim" kernels --gpu a100-sxm-80gb --model sd3-medium-mmdit --shape width=1024,height=1024,batch=2,cfg=2,pipefusion=4 --runtime diffusers >"$tmp/pipefusion.txt"
check "kernels --shape pipefusion= times the first stage's bands" grep -q "one GPU of a gang of 8: the first PipeFusion stage's kernels, 4 bands a step" "$tmp/pipefusion.txt"
"$fleetsim" kernels --gpu a100-sxm-80gb --model sd3-medium-mmdit --shape width=1024,height=1024,batch=2,cfg=2,pipefusion=4 --json >"$tmp/pipefusion.json"
check "kernels --shape pipefusion= --json names the split" bash -c "tr -d ' \\n' < '$tmp/pipefusion.json' | grep -q '\"parallel\":{\"gpus\":8.0,\"sequence\":1.0,\"ring\":1.0,\"cfg\":2.0,\"pipefusion\":4.0,\"patches\":4.0}'"
"$fleetsim" kernels --gpu a100-sxm-80gb --model sd3-medium-mmdit --shape width=1024,height=1024,pipefusion=2,sequence=2 >/dev/null 2>"$tmp/parallel.err"
check "kernels --shape pipefusion= with sequence= is refused by key" bash -c "test $? -eq 2 && grep -q 'pipefusion: PipeFusion beside sequence parallelism' '$tmp/parallel.err'"
"$fleetsim" kernels --gpu a100-sxm-80gb --model sd3-medium-mmdit --shape width=1024,height=1024,cfg=3 >/dev/null 2>"$tmp/parallel.err"
check "kernels --shape cfg=3 is refused" bash -c "test $? -eq 2 && grep -q 'cfg (1 or 2)' '$tmp/parallel.err'"

# Serving: a deployment's TTFT and TPOT, the same for one seed, and a deployment that cannot run refused by field.
"$fleetsim" serve "$src/scenarios/serving/llama-3-8b-chat.json" >"$tmp/serve.txt"
check "serve prints TTFT and TPOT percentiles" bash -c "grep -q '^ttft ' '$tmp/serve.txt' && grep -q '^tpot ' '$tmp/serve.txt' && grep -q '^goodput ' '$tmp/serve.txt'"
check "serve says what it assumed" grep -q "iteration_host of 1 ms is a guess" "$tmp/serve.txt"
"$fleetsim" serve "$src/scenarios/serving/llama-3-8b-chat.json" --json >"$tmp/serve1.json"
"$fleetsim" serve "$src/scenarios/serving/llama-3-8b-chat.json" --json >"$tmp/serve2.json"
check "serve --json has the TTFT percentiles" grep -q '"ttft_s"' "$tmp/serve1.json"
"$fleetsim" serve "$src/scenarios/serving/llama-3-8b-chat.json" --out "$tmp/serve-out" >/dev/null
check "serve --out writes serving.json and report.html" bash -c "cmp -s '$tmp/serve1.json' '$tmp/serve-out/serving.json' && grep -q 'ttft-cdf' '$tmp/serve-out/report.html'"
check "serve: same seed, same output" cmp -s "$tmp/serve1.json" "$tmp/serve2.json"
"$fleetsim" serve "$src/scenarios/serving/llama-3-8b-chat.json" --set /model=llama-3-70b >/dev/null 2>"$tmp/serve.err"
check "serve of a model that does not fit its TP group exits 2" test $? -eq 2
check "serve names the file and field" grep -q "llama-3-8b-chat.json: /tp: the model does not fit its TP group" "$tmp/serve.err"
cat >"$tmp/serving-plan.json" <<EOF
{"serving": "$(cd "$src" && pwd)/scenarios/serving/llama-3-70b-tp8.json", "search": {"node_types": ["hgx-h100-8"], "tp": [8], "replicas": {"min": 1, "max": 2}},
 "rates": ["10 /s"], "seeds": 1}
EOF
"$fleetsim" plan "$tmp/serving-plan.json" --out "$tmp/splan" >"$tmp/splan.txt"
check "plan over a serving deployment recommends one" grep -q "recommended: 1 replica of vllm at TP 8 on 1 hgx-h100-8 node (8 GPUs)" "$tmp/splan.txt"
check "plan over a serving deployment writes plan.json" grep -q '"recommended"' "$tmp/splan/plan.json"
"$fleetsim" plan "$src/scenarios/plans/serving-llama-3.1-405b.json" >"$tmp/splan405.txt"
check "a serving plan over stages and TP across nodes names the stages it recommends" grep -q "recommended: 1 replica of vllm at TP 8 x PP 2 on 2 hgx-h100-8 nodes (16 GPUs)" "$tmp/splan405.txt"
check "a serving plan says why a TP group cannot hold the model" grep -q "cannot run /tp: the model does not fit its TP group" "$tmp/splan405.txt"

echo "cli: $failures failed"
test $failures -eq 0
