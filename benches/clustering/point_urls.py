"""Prints 20 point statements `WHERE "URL" = '...'`, each value held by exactly one object.

Usage: point_urls.py DATA_DIR (the table's data directory in a local store). Values are drawn
with a fixed seed from the URLs that occur in one object only, one object after another.
"""
import collections
import pathlib
import random
import sys

import pyarrow.parquet as pq

data = sorted(pathlib.Path(sys.argv[1]).glob("*.parquet"))
holders = collections.defaultdict(set)
for i, f in enumerate(data):
    for u in pq.read_table(f, columns=["URL"]).column("URL").unique().to_pylist():
        holders[u].add(i)
single = collections.defaultdict(list)
for u, objs in holders.items():
    if len(objs) == 1 and u:
        single[next(iter(objs))].append(u)
rng = random.Random(1)
picked = []
objects = sorted(single)
while len(picked) < 20 and any(single.values()):
    for o in objects:
        if single[o] and len(picked) < 20:
            u = single[o].pop(rng.randrange(len(single[o])))
            picked.append(u)
for u in picked:
    u = u.decode() if isinstance(u, bytes) else u
    u = u.replace("'", "''")
    print(f"SELECT COUNT(*), MIN(\"EventTime\") FROM hits WHERE \"URL\" = '{u}';")
