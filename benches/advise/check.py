#!/usr/bin/env python3
"""advise's estimates against measured bytes, for one statement log.

Usage: check.py BIN STORE LOG INPUT [advise flags...]

Runs `advise --json` on table `hits` of STORE, loads INPUT under each of the three best
candidates (and reads the current table as it is), runs the log with `bench-queries --json`
on each and prints, per candidate, the estimated and measured bytes over the log, then the
measured ranking against the estimated one, as markdown.
"""
import hashlib
import json
import os
import subprocess
import sys
import time


def run(bin_, *args):
    return subprocess.run([bin_, *args], check=True, capture_output=True, text=True).stdout


def load_table(bin_, store, name, layout, data):
    if os.path.exists(os.path.join(store, name)):
        return
    lay = lambda *a: run(bin_, "layout", "--store", store, "--table", name, *a)
    lay("schema", "set", "--hits")
    if layout.get("stream"):
        lay("stream", "set", "--column", layout["stream"])
    else:
        lay("stream", "clear")
    lay("time", "set", "--column", layout["time"])
    key = layout["clustering_key"]
    cols = [a for c in key["columns"] for a in ("--column", c)]
    lay("clustering-key", "set", *cols, "--bucket-width", key["bucket_width"])
    scope = layout["bloom"]["scope"]
    scope = scope if isinstance(scope, str) else ",".join(scope["columns"])
    lay("bloom-scope", "set", "--scope", scope)
    run(bin_, "load", "--store", store, "--table", name, "--input", data, "--compact")


def measure(bin_, store, table, log):
    """Cold bytes of each statement, by its line in the log."""
    out = run(bin_, "bench-queries", "--store", store, "--table", table, "--queries", log,
              "--json", "--as", "hits")
    return {r["number"]: r["cold_bytes"] for r in json.loads(out)}


def per_statement(candidate, measured):
    print(f"\nper statement, {candidate['name']}:\n")
    print("| line | estimated bytes | measured bytes | est/meas |")
    print("|---|---|---|---|")
    for s in candidate["statements"]:
        meas = measured.get(s["line"])
        ratio = f"{s['bytes'] / meas:.3f}" if meas else "-"
        print(f"| {s['line']} | {s['bytes']:,} | {meas if meas is None else f'{meas:,}'} | {ratio} |")


def main():
    bin_, store, log, data, *extra = sys.argv[1:]
    started = time.time()
    advice = json.loads(run(bin_, "advise", "--store", store, "--table", "hits", "--queries",
                            log, "--json", *extra))
    wall = time.time() - started
    a = advice["advice"]
    print(f"log {os.path.basename(log)}: {a['statements']} statements, sample {a['sample_rows']} "
          f"of {a['table_rows']} rows, advise {a['seconds']:.2f} s ({wall:.2f} s wall)\n")
    print("| rank | candidate | estimated bytes | measured bytes | est/meas | vs current (measured) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for i, c in enumerate(a["candidates"]):
        if c["kind"] == "current":
            table = "hits"
        elif i < 3:
            table = "t_" + hashlib.md5(c["name"].encode()).hexdigest()[:8]
            load_table(bin_, store, table, c["layout"], data)
        else:
            continue
        est = sum(s["bytes"] * s["weight"] for s in c["statements"])
        measured = measure(bin_, store, table, log)
        meas = sum(measured[s["line"]] * s["weight"] for s in c["statements"])
        rows.append((i + 1, c["name"], est, meas, c["kind"], measured))
    current = next(r[3] for r in rows if r[4] == "current")
    for rank, name, est, meas, kind, _ in rows:
        mark = "*" if rank - 1 == a["recommended"] else ""
        print(f"| {rank}{mark} | {name} | {est:,} | {meas:,} | {est / meas:.3f} | {meas / current:.3f} |")
    top = [r for r in rows if r[0] <= 3]
    by_measured = [r[0] for r in sorted(top, key=lambda r: r[3])]
    # Byte counts within 1 % of each other are ties (layouts whose orders are the same differ
    # only in their logs' sizes): the ranking matches when no pair is inverted beyond that.
    inverted = [(a[0], b[0]) for a in top for b in top
                if a[0] < b[0] and a[2] < b[2] * 0.99 and a[3] > b[3] * 1.01]
    verdict = "matches" if not inverted else f"inverted pairs {inverted}"
    print(f"\nranking of the top three: estimated {[r[0] for r in top]}, measured {by_measured} "
          f"(ties within 1 %): {verdict}")
    best = next(r for r in rows if r[0] - 1 == a["recommended"])
    per_statement(a["candidates"][a["recommended"]], best[5])


if __name__ == "__main__":
    main()
