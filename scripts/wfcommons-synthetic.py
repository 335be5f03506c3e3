#!/usr/bin/env python3
"""A synthetic WfCommons (WfFormat 1.5) instance of N tasks for timing: a source, two wide levels, a
small sink level, each task reading its parents' outputs (10-200 MB) and running 1-30 s. Not a recorded
run; the same seed gives the same file.

    python3 scripts/wfcommons-synthetic.py 100 wf100.json
    fleetsim simulate wf100.json --cluster hgx-h100-8
"""
import json
import random
import sys


def main():
    if len(sys.argv) != 3 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 4:
        sys.exit("usage: wfcommons-synthetic.py TASKS(>=4) OUT.json")
    total = int(sys.argv[1])
    rng = random.Random(7)
    wide = (total - 4) // 2
    levels = [1, wide, total - 4 - wide, 3]
    tasks, files, runs, previous, k = [], [], [], [], 0
    for level, width in enumerate(levels):
        current = []
        for i in range(width):
            tid = f"t{k:05d}"
            k += 1
            if not previous:
                parents = []
            elif level == 3 or len(previous) <= 3:
                parents = list(previous)
            else:
                parents = sorted({previous[i % len(previous)], previous[(i + 1) % len(previous)]})
            tasks.append({"name": f"level{level}", "id": tid, "parents": parents, "children": [],
                          "inputFiles": [f"{p}.out" for p in parents], "outputFiles": [f"{tid}.out"]})
            files.append({"id": f"{tid}.out", "sizeInBytes": rng.randint(10_000_000, 200_000_000)})
            runs.append({"id": tid, "runtimeInSeconds": round(rng.uniform(1, 30), 2)})
            current.append(tid)
        previous = current
    by_id = {t["id"]: t for t in tasks}
    for t in tasks:
        for p in t["parents"]:
            by_id[p]["children"].append(t["id"])
    doc = {"name": f"synthetic-{total}", "description": "synthetic instance for timing (scripts/wfcommons-synthetic.py), not a recorded run",
           "schemaVersion": "1.5",
           "workflow": {"specification": {"tasks": tasks, "files": files}, "execution": {"makespanInSeconds": 0.0, "tasks": runs}}}
    with open(sys.argv[2], "w") as out:
        json.dump(doc, out)


if __name__ == "__main__":
    main()
