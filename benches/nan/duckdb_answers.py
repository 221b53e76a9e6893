#!/usr/bin/env python3
"""DuckDB's answers for float comparisons against NaN, ±inf, ±0 and nulls, and ravel-load's.

    python3 benches/nan/duckdb_answers.py [--bin BIN] [--work DIR]

Builds the float table of crates/ravel-query/tests/floats.rs (the same values in the same
order), counts the rows of each statement in DuckDB over the values in memory, and prints the
counts. With --bin, also loads the table with that ravel-load binary (clustered by `f`, small
objects) and runs every statement through `ravel-load query`, with and without manifest
pruning, and through DuckDB's own Parquet reader over the table's objects, and prints those
counts beside DuckDB's in-memory one. Exit 0 when ravel-load agrees everywhere, 1 otherwise.
Needs pyarrow and duckdb (pip install duckdb).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0000_0000_0000))[0]
# (value, rows): the special values, then 2000 ordinary ones (k - 999.75).
SPECIAL = [
    (float("nan"), 900),
    (NEG_NAN, 100),
    (float("inf"), 300),
    (float("-inf"), 200),
    (0.0, 400),
    (-0.0, 500),
    (1.5, 600),
    (None, 700),
]
ORDINARY = 2000
# f (and h, half precision) and g hold the values in two orders (steps coprime to n)
F_STEP, G_STEP = 4999, 7919

LITERALS = ["'NaN'", "'inf'", "'-inf'", "0.0", "-0.0", "1.5", "NULL"]
OPERATORS = ["=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "NOT =", "NOT <"]
COLUMNS = ["f", "g", "h"]


def values():
    out = []
    for v, n in SPECIAL:
        out += [v] * n
    out += [k - 999.75 for k in range(ORDINARY)]
    return out


def table():
    v = values()
    n = len(v)
    f = [v[(i * F_STEP) % n] for i in range(n)]
    g = [v[(i * G_STEP) % n] for i in range(n)]
    return pa.table(
        {
            "t": pa.array([1_372_636_800_000] * n, pa.timestamp("ms")),
            "f": pa.array(f, pa.float64()),
            "g": pa.array(g, pa.float32()),
            "h": pc.cast(pa.array(f, pa.float64()), pa.float16()),
        }
    )


def where(column, op, lit):
    if op in ("IN", "NOT IN"):
        return f"{column} {op} ({lit}, 99)"
    if op.startswith("NOT "):
        return f"NOT ({column} {op[4:]} {lit})"
    return f"{column} {op} {lit}"


def statements():
    for c in COLUMNS:
        for lit in LITERALS:
            for op in OPERATORS:
                yield c, lit, op, f"SELECT count(*) FROM t WHERE {where(c, op, lit)}"


def count(con, sql):
    return con.execute(sql).fetchone()[0]


def ravel(bin_, store, sql, pruning):
    args = [bin_, "query", "--store", store, "--table", "t", "--format", "csv", sql]
    if not pruning:
        args.insert(2, "--no-manifest-pruning")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1])


def load(bin_, work, path):
    store = os.path.join(work, "store")
    run = lambda *a: subprocess.run([bin_, *a], check=True, capture_output=True)
    base = ["--store", store, "--table", "t"]
    run("layout", *base, "schema", "set", "--from", path)
    run("layout", *base, "time", "set", "--column", "t")
    run("layout", *base, "clustering-key", "set", "--column", "f", "--bucket-width", "1d")
    run("load", *base, "--input", path, "--object-bytes", "1500", "--zstd-level", "1")
    return store


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="nan-duckdb-")
    path = os.path.join(work, "floats.parquet")
    pq.write_table(table(), path)
    con = duckdb.connect()
    # In memory, read whole (no filter): DuckDB's answers over the values themselves.
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{path}')")
    store = None
    if a.bin:
        store = load(a.bin, work, path)
        objects = os.path.join(store, "t", "data", "*.parquet")
        files = duckdb.connect()
        files.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{objects}')")
    differ = 0
    print("column\tliteral\top\tduckdb" + ("\travel\tunpruned\tduckdb-parquet" if store else ""))
    for c, lit, op, sql in statements():
        want = count(con, sql)
        row = [c, lit, op, str(want)]
        if store:
            got = [ravel(a.bin, store, sql, True), ravel(a.bin, store, sql, False)]
            row += [str(x) for x in got] + [str(count(files, sql))]
            differ += sum(x != want for x in got)
        print("\t".join(row))
    if store:
        print(f"{differ} ravel-load answers differ from DuckDB's", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
