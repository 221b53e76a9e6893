#!/usr/bin/env python3
"""A model, not a measurement: the wall time of a job on W workers from per-step costs measured
one step at a time on one machine (`steps.py`'s steps.json).

Each worker is a machine like the measuring one and runs one step at a time. A stage of n
steps takes ceil(n / W) rounds of its mean step, plus once its slowest step's excess over the
mean (the straggler of its last round). Plan and commit run once, as measured. The store is
assumed to keep up with every worker at once (no bandwidth limit is modelled).

usage: model.py STEPS_JSON... [--workers 8,32,128]
"""

import argparse
import json
import math
import statistics


def stage(steps, workers):
    if not steps:
        return 0.0
    walls = [s["wall_s"] for s in steps]
    mean = statistics.mean(walls)
    return math.ceil(len(walls) / workers) * mean + (max(walls) - mean)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--workers", default="8,32,128")
    a = p.parse_args()
    workers = [int(w) for w in a.workers.split(",")]
    print("| steps | one worker (measured sum) | " + " | ".join(f"{w} workers (model)" for w in workers) + " |")
    print("|---|---|" + "---|" * len(workers))
    for f in a.files:
        with open(f) as fh:
            j = json.load(fh)
        steps = j["steps"]
        split = [s for s in steps if s["kind"] == "split"]
        merge = [s for s in steps if s["kind"] == "merge"]
        fixed = j["plan_s"] + j["commit_s"]
        one = fixed + sum(s["wall_s"] for s in steps)
        cells = [f"{fixed + stage(split, w) + stage(merge, w):.1f} s" for w in workers]
        print(f"| {len(merge)} | {one:.1f} s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
