"""Summarises a benches/clustering/run.sh work directory as Markdown tables."""
import json
import pathlib
import sys

w = pathlib.Path(sys.argv[1])


def close(a, b):
    """Whether two CSV answers differ only in floats, by a relative 1e-12."""
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        for u, v in zip(x.split(","), y.split(",")):
            if u == v:
                continue
            try:
                fu, fv = float(u), float(v)
            except ValueError:
                return False
            if abs(fu - fv) > 1e-12 * max(abs(fu), abs(fv)):
                return False
    return True


def bench(name):
    return json.loads((w / name).read_text())


def totals(runs, numbers=None):
    sel = [r for r in runs if numbers is None or r["number"] in numbers]
    ok = [r for r in sel if r.get("error") is None]
    return (
        sum(r["cold_gets"] or 0 for r in ok),
        sum(r["cold_bytes"] or 0 for r in ok),
        sum(r["cold_s"] or 0 for r in ok),
        len(sel) - len(ok),
    )


loads = {t: json.loads((w / f"{t}.load.json").read_text()) for t in ("clustered", "arrival")}
runs = {t: bench(f"{t}.bench.json") for t in ("clustered", "arrival")}
print("| table | objects | stored bytes |")
print("|---|---|---|")
for t, l in loads.items():
    print(f"| {t} | {len(l['objects'])} | {l['stored_bytes']:,} |")
print()
print("| statements | table | GETs | bytes | cold s (sum) | failed |")
print("|---|---|---|---|---|---|")
for label, nums in (("Q37-Q43", set(range(37, 44))), ("all 43", None)):
    for t in ("clustered", "arrival"):
        g, b, s, f = totals(runs[t], nums)
        print(f"| {label} | {t} | {g:,} | {b:,} | {s:.2f} | {f} |")
    gc, bc, _, _ = totals(runs["clustered"], nums)
    ga, ba, _, _ = totals(runs["arrival"], nums)
    print(f"| {label} | clustered/arrival | {gc / ga:.3f} | {bc / ba:.4f} | | |")
print()
print("Per statement (cold bytes clustered / arrival, objects kept):")
print("| Q | rows | bytes clustered | bytes arrival | ratio | kept c | kept a | answers |")
print("|---|---|---|---|---|---|---|---|")
for rc, ra in zip(runs["clustered"], runs["arrival"]):
    n = rc["number"]
    a = (w / "clustered.answers" / f"{n}.csv").read_text()
    b = (w / "arrival.answers" / f"{n}.csv").read_text()
    fa, fb = (w / t / f"{n}.full.csv" for t in ("clustered.answers", "arrival.answers"))
    if a == b:
        same = "equal"
    elif sorted(a.splitlines()) == sorted(b.splitlines()):
        same = "equal rows, other order"
    elif fa.exists() and fb.exists() and fa.read_text() == fb.read_text():
        same = f"equal without LIMIT ({len(fa.read_text().splitlines()) - 1:,} rows): ties"
    elif close(a, b):
        same = "equal to 1e-12 (float summation order)"
    else:
        same = "DIFFER"
    if rc.get("error") or ra.get("error"):
        same += f" (error: {rc.get('error') or ra.get('error')})"
    bc, ba = rc["cold_bytes"] or 0, ra["cold_bytes"] or 0
    print(
        f"| {n} | {rc['rows']} | {bc:,} | {ba:,} | {bc / ba if ba else 0:.3f} | "
        f"{rc['objects_kept']}/{rc['objects_total']} | {ra['objects_kept']}/{ra['objects_total']} | {same} |"
    )
print()
print("| statements (clustered table) | manifest pruning | GETs | bytes | objects touched | cold s |")
print("|---|---|---|---|---|---|")
for f in ("urls", "q37-43"):
    for p in ("pruned", "unpruned"):
        r = bench(f"{f}.{p}.json")
        g, b, s, _ = totals(r)
        touched = sum(x["objects_touched"] or 0 for x in r)
        print(f"| {f} ({len(r)}) | {'on' if p == 'pruned' else 'off'} | {g:,} | {b:,} | {touched} | {s:.2f} |")
