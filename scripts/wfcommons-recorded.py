#!/usr/bin/env python3
"""WfCommons instances as recorded beside fleetsim's simulation of them.

Each instance of a WfInstances checkout (github.com/wfcommons/WfInstances) that carries a recorded makespan
is simulated alone on a cluster of as many GPUs as the recorded machines had cores (8-GPU HGX H100 nodes,
FIFO), each task taking its recorded runtime on one GPU. Prints a Markdown table: the recorded makespan,
the simulated one, their ratio, and two bounds from the recorded runtimes alone (the critical path, and the
sum of runtimes over the cores), so a gap can be read: a recorded makespan far above both bounds is time
the recording spent outside its tasks (staging, queueing, the workflow system), which the mapping leaves out.

  python3 scripts/wfcommons-recorded.py WFINSTANCES_DIR [--fleetsim build/fleetsim] [--match -001.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def bounds(instance):
    """The critical path of recorded runtimes, and the runtimes' sum."""
    w = instance["workflow"]
    runtime = {t["id"]: t["runtimeInSeconds"] for t in w["execution"]["tasks"]}
    parents = {t["id"]: t.get("parents", []) for t in w["specification"]["tasks"]}
    finish = {}

    def done(task):
        if task not in finish:
            stack = [task]
            while stack:  # iterative, for deep chains
                t = stack[-1]
                pending = [p for p in parents[t] if p not in finish]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                finish[t] = runtime[t] + max((finish[p] for p in parents[t]), default=0.0)
        return finish[task]

    return max(done(t) for t in parents), sum(runtime.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--fleetsim", default="build/fleetsim")
    ap.add_argument("--match", default="-001.json", help="simulate files whose names end so (default: the first of each kind)")
    args = ap.parse_args()
    rows = []
    for dirpath, _, files in sorted(os.walk(args.root)):
        for name in sorted(files):
            if not name.endswith(args.match):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path) as f:
                    instance = json.load(f)
            except (OSError, ValueError):
                continue  # a stub of a large file not fetched
            execution = instance.get("workflow", {}).get("execution", {})
            if "makespanInSeconds" not in execution or instance.get("schemaVersion") not in ("1.4", "1.5", "1.6"):
                continue
            cores = sum((m.get("cpu") or {}).get("coreCount", 0) or 0 for m in execution.get("machines", []))
            if cores <= 0:
                continue
            nodes = math.ceil(cores / 8)
            scenario = {"name": name, "seed": 1, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": nodes}]},
                        "workflows": {"w": os.path.abspath(path)}, "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
                        "policy": {"name": "fifo"}}
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(scenario, f)
                scenario_path = f.name
            try:
                out = subprocess.run([args.fleetsim, "simulate", scenario_path, "--json"], capture_output=True, text=True, check=True).stdout
            except subprocess.CalledProcessError as e:
                print(f"{path}: fleetsim failed: {e.stderr.strip()}", file=sys.stderr)
                continue
            finally:
                os.unlink(scenario_path)
            check = json.loads(out)["recorded_runs"][0]
            critical, total = bounds(instance)
            rows.append((os.path.relpath(path, args.root), len(instance["workflow"]["specification"]["tasks"]), cores, check["recorded_makespan_s"],
                         check["simulated_makespan_s"], critical, total / cores))
    print("| instance | tasks | cores (GPUs here) | recorded | simulated | simulated / recorded | critical path | runtimes / cores |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} s | {r[4]:.1f} s | {r[4] / r[3]:.2f} | {r[5]:.1f} s | {r[6]:.1f} s |")


if __name__ == "__main__":
    main()
