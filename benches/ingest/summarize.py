#!/usr/bin/env python3
"""Totals of an ingest run (benches/ingest/run.sh): per table, loads' and merges' seconds and
bytes, cumulative write amplification (merge bytes written over bytes loaded), depth after
each load, peak RSS; per query checkpoint, the point statements' cold bytes and GETs on P over C."""
import json, sys

w = sys.argv[1]
recs = [json.loads(l) for l in open(f"{w}/ingest.jsonl")]
P = [r for r in recs if r["table"] == "P"]
C = [r for r in recs if r["table"] == "C"]

def p_row(r):
    m = r["maintenance"] or {}
    return m.get("wall_s", 0.0), m.get("written_bytes", 0), m.get("depth_after")

loaded = sum(r["stored_bytes"] for r in P)
p_maint_s = sum(p_row(r)[0] for r in P)
p_written = sum(p_row(r)[1] for r in P)
p_load_s = sum(r["wall_s"] for r in P) - p_maint_s
p_depths = [p_row(r)[2] for r in P]
c_written = sum((r["compact"] or {}).get("written_bytes", 0) for r in C)
c_compact_s = sum(r["compact_wall_s"] for r in C)
c_load_s = sum(r["wall_s"] for r in C)
print(f"loads: {len(P)}, loaded {loaded} bytes")
print(f"P (policy): load {p_load_s:.1f} s, maintenance {p_maint_s:.1f} s "
      f"({p_maint_s / max(p_load_s, 1e-9):.2f}x the loads), written {p_written} bytes, "
      f"write amplification {p_written / max(loaded, 1):.2f}, depth max {max(p_depths)}, "
      f"peak RSS {max(r['rss_kb'] for r in P) / 1024:.0f} MB")
print(f"C (compact after every load): load {c_load_s:.1f} s, compact {c_compact_s:.1f} s "
      f"({c_compact_s / max(c_load_s, 1e-9):.2f}x the loads), written {c_written} bytes, "
      f"write amplification {c_written / max(loaded, 1):.2f}, "
      f"peak RSS {max(max(r['rss_kb'], r['compact_rss_kb']) for r in C) / 1024:.0f} MB")
print("per load (P): load, maintenance s, written bytes, cumulative WA, depth")
acc_w, acc_l = 0, 0
for r in P:
    s, wr, d = p_row(r)
    acc_w += wr; acc_l += r["stored_bytes"]
    print(f"  {r['load']:3d} {r['wall_s'] - s:6.2f} {s:6.2f} {wr:11d} {acc_w / acc_l:5.2f} {d}")
print("point statements, cold (sum over statements): load, P bytes/C bytes, P GETs/C GETs, worst statement bytes and GETs ratio")
qs = [json.loads(l) for l in open(f"{w}/queries.jsonl")]
by = {}
for q in qs:
    by.setdefault(q["load"], {})[q["table"]] = q["runs"]
for n in sorted(by):
    p, c = by[n].get("P"), by[n].get("C")
    if not p or not c:
        continue
    pb = sum(x["cold_bytes"] or 0 for x in p); cb = sum(x["cold_bytes"] or 0 for x in c)
    pg = sum(x["cold_gets"] or 0 for x in p); cg = sum(x["cold_gets"] or 0 for x in c)
    worst_b = max((x["cold_bytes"] or 0) / max(y["cold_bytes"] or 1, 1) for x, y in zip(p, c))
    worst_g = max((x["cold_gets"] or 0) / max(y["cold_gets"] or 1, 1) for x, y in zip(p, c))
    print(f"  {n:3d} {pb / max(cb, 1):5.2f} {pg / max(cg, 1):5.2f}  {worst_b:5.2f} {worst_g:5.2f}  (P {pb} B {pg} GETs, C {cb} B {cg} GETs)")
