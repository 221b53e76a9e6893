"""Reads a ravel-load table as Delta Lake with engines ravel-load did not write, and prints what
each answers: rows, and the rows with CounterID < 100 when the table has that column.

    python benches/delta/readers.py STORE/TABLE [DUCKDB_DELTA_EXTENSION_FILE]

Readers: deltalake (delta-rs), polars (its own Delta reader), duckdb's delta extension (from
`INSTALL delta`, or the file given, e.g. from PyPI's duckdb-extension-delta matching duckdb).
"""
import sys

path = sys.argv[1]
extension = sys.argv[2] if len(sys.argv) > 2 else None


def deltalake_answers():
    import deltalake
    import pyarrow.compute as pc
    dt = deltalake.DeltaTable(path)
    t = dt.to_pyarrow_table()
    filtered = pc.sum(pc.less(t["CounterID"], 100)).as_py() if "CounterID" in t.column_names else None
    return dt.version(), t.num_rows, filtered


def polars_answers():
    import polars as pl
    df = pl.read_delta(path)
    filtered = df.filter(pl.col("CounterID") < 100).height if "CounterID" in df.columns else None
    return None, df.height, filtered


def duckdb_answers():
    import duckdb
    c = duckdb.connect()
    c.sql(f"LOAD '{extension}'" if extension else "INSTALL delta; LOAD delta")
    scan = f"delta_scan('{path}')"
    rows = c.sql(f"SELECT count(*) FROM {scan}").fetchone()[0]
    names = [r[0] for r in c.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()]
    filtered = (c.sql(f'SELECT count(*) FROM {scan} WHERE "CounterID" < 100').fetchone()[0]
                if "CounterID" in names else None)
    return None, rows, filtered


for name, read in [("deltalake", deltalake_answers), ("polars", polars_answers),
                   ("duckdb", duckdb_answers)]:
    try:
        version, rows, filtered = read()
        print(f"{name:10} version {version} rows {rows} CounterID<100 {filtered}")
    except Exception as e:  # a reader that refuses the table says why
        print(f"{name:10} refused: {str(e).splitlines()[0][:200]}")
