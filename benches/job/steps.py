#!/usr/bin/env python3
"""Per-step cost of a distributed load, measured one step at a time on this machine.

Generates FILES Parquet files of ROWS rows each (seeds 1..FILES), makes a table with the hits
layout, plans `load --steps N`, runs every step through `ravel-load run-step` (split steps
first, PARALLEL at once), commits, and prints per stage: wall seconds, bytes read and written,
and peak RSS of each step's process; then plan and commit wall, plan size and log entry size.
Everything is also written to WORKDIR/steps-N.json (`model.py` reads it).

usage: steps.py BIN WORKDIR --files F --rows R --steps N [--parallel P] [--object-bytes B]
                [--load-budget B] [--keep-inputs]
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def run(args, **kw):
    """Runs a command; returns (wall seconds, peak RSS in bytes)."""
    t = time.monotonic()
    p = subprocess.Popen(args, stdout=kw.get("stdout", subprocess.DEVNULL), stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(args[:3])} failed: {p.stderr.read().decode()}")
    return wall, usage.ru_maxrss * 1024


def table(binary, store, sample):
    shutil.rmtree(store, ignore_errors=True)
    layout = [
        ["schema", "set", "--from", sample],
        ["stream", "set", "--column", "CounterID"],
        ["time", "set", "--column", "EventTime"],
        ["clustering-key", "set", "--column", "EventDate", "--column", "UserID", "--bucket-width", "1d"],
        ["bloom-scope", "set", "--scope", "text"],
    ]
    for args in layout:
        run([binary, "layout", "--store", store, "--table", "hits", *args])


def step(binary, plan, index, out):
    wall, rss = run([binary, "run-step", "--plan", plan, "--step", str(index), "--out", out])
    with open(out) as f:
        r = json.load(f)
    return {"step": index, "kind": r["kind"], "wall_s": wall, "rss": rss, "rows": r["rows"],
            "read": r["cost"]["read_bytes"], "written": r["cost"]["written_bytes"],
            "passes": r["cost"].get("passes", 0)}


def summary(kind, rows):
    if not rows:
        return f"{kind}: none"
    f = lambda key: [r[key] for r in rows]
    mean = lambda key: statistics.mean(f(key))
    return (f"{kind}: {len(rows)} steps, wall mean {mean('wall_s'):.2f} s max {max(f('wall_s')):.2f} s "
            f"sum {sum(f('wall_s')):.1f} s; read {sum(f('read')):,} B (mean {mean('read'):,.0f}); "
            f"written {sum(f('written')):,} B (mean {mean('written'):,.0f}); "
            f"peak RSS mean {mean('rss') / 1e6:,.0f} MB max {max(f('rss')) / 1e6:,.0f} MB; "
            f"passes max {max(f('passes'))}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("workdir")
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--rows", type=int, required=True, help="rows per file")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--object-bytes", type=int)
    p.add_argument("--load-budget", type=int)
    a = p.parse_args()
    binary, w = os.path.realpath(a.binary), os.path.realpath(a.workdir)
    os.makedirs(os.path.join(w, "in"), exist_ok=True)
    inputs = []
    for s in range(1, a.files + 1):
        path = os.path.join(w, "in", f"p{s:03}-{a.rows}.parquet")
        if not os.path.exists(path):
            run([binary, "gen", "--rows", str(a.rows), "--seed", str(s), "--out", path])
        inputs.append(path)
    store = os.path.join(w, "store")
    table(binary, store, inputs[0])
    plan = os.path.join(w, "plan.json")
    args = [binary, "plan", "load", "--store", store, "--table", "hits", "--steps", str(a.steps), "--out", plan]
    if a.object_bytes:
        args += ["--object-bytes", str(a.object_bytes)]
    if a.load_budget:
        args += ["--load-budget", str(a.load_budget)]
    plan_s, plan_rss = run(args + ["--input", *inputs])
    with open(plan) as f:
        job = json.load(f)
    results = os.path.join(w, "results")
    shutil.rmtree(results, ignore_errors=True)
    os.makedirs(results)
    done = []
    t = time.monotonic()
    for kind in ("split", "merge"):
        indices = [s["index"] for s in job["steps"] if s["kind"] == kind]
        with concurrent.futures.ThreadPoolExecutor(a.parallel) as pool:
            outs = [os.path.join(results, f"r{i:05}.json") for i in indices]
            done += list(pool.map(lambda io: step(binary, plan, *io), zip(indices, outs)))
    steps_s = time.monotonic() - t
    out = os.path.join(w, "commit.json")
    with open(out, "w") as f:
        commit_s, commit_rss = run([binary, "commit", "--plan", plan, "--json", "--", *sorted(
            os.path.join(results, r) for r in os.listdir(results))], stdout=f)
    with open(out) as f:
        report = json.load(f)
    print(f"input: {a.files} files x {a.rows:,} rows, {sum(os.path.getsize(i) for i in inputs):,} bytes")
    print(f"plan: {plan_s:.2f} s, {os.path.getsize(plan):,} bytes, {len(job['steps'])} steps, peak RSS {plan_rss / 1e6:,.0f} MB")
    print(summary("split", [d for d in done if d["kind"] == "split"]))
    print(summary("merge", [d for d in done if d["kind"] == "merge"]))
    print(f"steps: {steps_s:.1f} s wall at {a.parallel} at once")
    print(f"commit: {commit_s:.2f} s (published after {report.get('published_s', 0):.2f} s), peak RSS {commit_rss / 1e6:,.0f} MB, version {report.get('version')}, "
          f"{report.get('objects')} objects, {report.get('rows'):,} rows, log entry {report.get('entry_bytes'):,} bytes")
    with open(os.path.join(w, f"steps-{a.steps}.json"), "w") as f:
        json.dump({"plan_s": plan_s, "commit_s": commit_s, "steps": done, "commit": report}, f, indent=1)


if __name__ == "__main__":
    main()
