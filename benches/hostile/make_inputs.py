#!/usr/bin/env python3
"""Write the hostile inputs for benches/hostile/run.sh into OUT_DIR.

  one_counter.parquet  hits rows (from `ravel-load gen`) whose CounterID is one constant:
                       every row belongs to a single stream.
  big_urls.parquet     hits rows (from `ravel-load gen`) whose URL is a ~1 MiB value, varied per
                       row (row-specific pattern + random hex); small row groups.
  wide.parquet         WIDE_COLS columns, 1 row: CounterID (Int32), EventTime (Int64 seconds) and
                       filler columns cycling Int64, Int32, Utf8, Binary.

The schemas of the hits files are exactly those `gen` writes (types and nullability kept); only
values change. Output is zstd Parquet.

Usage: make_inputs.py OUT_DIR [--bin PATH] [--rows N] [--url-rows N] [--url-bytes N]
                              [--url-row-group N] [--wide-cols N] [--only NAME ...] [--keep]
"""
import argparse
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def gen(bin_path, rows, seed, out):
    subprocess.run([bin_path, "gen", "--rows", str(rows), "--seed", str(seed), "--out", out],
                   check=True)


def replace_column(batch_or_table, name, array):
    """Same schema (field object, so type and nullability), one column's values replaced."""
    schema = batch_or_table.schema
    i = schema.get_field_index(name)
    cols = list(batch_or_table.columns)
    cols[i] = array
    if isinstance(batch_or_table, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(cols, schema=schema)
    return pa.Table.from_arrays(cols, schema=schema)


def make_one_counter(out_dir, bin_path, rows, row_group, keep):
    out = os.path.join(out_dir, "one_counter.parquet")
    tmp = os.path.join(out_dir, "_gen_one_counter.parquet")
    gen(bin_path, rows, 1, tmp)
    src = pq.ParquetFile(tmp)
    schema = src.schema_arrow
    ctype = schema.field("CounterID").type
    # The constant: the first row's CounterID (a real value of the generator).
    first = next(src.iter_batches(batch_size=1, columns=["CounterID"]))
    const = first.column(0)[0].as_py()
    n = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as w:
        for batch in src.iter_batches(batch_size=row_group):
            col = pa.array([const] * batch.num_rows, type=ctype)
            w.write_batch(replace_column(batch, "CounterID", col), row_group_size=row_group)
            n += batch.num_rows
    if not keep:
        os.remove(tmp)
    print(f"one_counter: {n} rows, CounterID={const} ({ctype}), row groups of {row_group}, "
          f"{os.path.getsize(out)} bytes -> {out}")


def url_value(i, nbytes, random_bytes):
    """nbytes of ASCII: a row-specific header and pattern with random hex mixed in."""
    rnd = os.urandom(random_bytes // 2).hex()  # random_bytes hex chars, incompressible-ish
    head = f"https://hostile.example/{i}/"
    pattern = f"row{i}-{(i * 2654435761) % 2**32:08x}/"
    fill = nbytes - len(head) - len(rnd)
    body = (pattern * (fill // len(pattern) + 1))[:fill]
    # interleave: head, half pattern, random hex, other half pattern
    half = len(body) // 2
    v = head + body[:half] + rnd + body[half:]
    assert len(v) == nbytes
    return v


def make_big_urls(out_dir, bin_path, rows, url_bytes, row_group, keep):
    out = os.path.join(out_dir, "big_urls.parquet")
    tmp = os.path.join(out_dir, "_gen_big_urls.parquet")
    gen(bin_path, rows, 1, tmp)
    src = pq.ParquetFile(tmp)
    schema = src.schema_arrow
    utype = schema.field("URL").type
    names = schema.names
    # URL: no dictionary (unique 1 MiB values), no statistics (1 MiB min/max per row group
    # would bloat the footer; that is a different hostile case than the one meant here).
    other = [c for c in names if c != "URL"]
    random_bytes = url_bytes // 4
    n = 0
    with pq.ParquetWriter(out, schema, compression="zstd", use_dictionary=other,
                          write_statistics=other) as w:
        for batch in src.iter_batches(batch_size=row_group):
            vals = [url_value(n + j, url_bytes, random_bytes) for j in range(batch.num_rows)]
            if pa.types.is_binary(utype) or pa.types.is_large_binary(utype):
                vals = [v.encode("ascii") for v in vals]
            col = pa.array(vals, type=utype)
            w.write_batch(replace_column(batch, "URL", col), row_group_size=row_group)
            n += batch.num_rows
    if not keep:
        os.remove(tmp)
    print(f"big_urls: {n} rows, URL {url_bytes} bytes each ({utype}), row groups of {row_group}, "
          f"{os.path.getsize(out)} bytes -> {out}")


def make_wide(out_dir, ncols):
    out = os.path.join(out_dir, "wide.parquet")
    fields = [pa.field("CounterID", pa.int32(), nullable=False),
              pa.field("EventTime", pa.int64(), nullable=False)]
    arrays = [pa.array([62], pa.int32()), pa.array([1373875200], pa.int64())]
    kinds = [(pa.int64(), lambda i: i * 1000003),
             (pa.int32(), lambda i: i),
             (pa.utf8(), lambda i: f"value-{i}"),
             (pa.binary(), lambda i: f"bytes-{i}".encode())]
    for k in range(ncols - 2):
        t, f = kinds[k % len(kinds)]
        fields.append(pa.field(f"c{k:05d}", t))
        arrays.append(pa.array([f(k)], t))
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    pq.write_table(table, out, compression="zstd")
    print(f"wide: {table.num_columns} columns, {table.num_rows} row, "
          f"{os.path.getsize(out)} bytes -> {out}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bin = os.path.join(here, "..", "..", "target", "release", "ravel-load")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--bin", default=os.environ.get("RAVEL_BIN", default_bin),
                   help="ravel-load binary used for `gen` (env RAVEL_BIN)")
    p.add_argument("--rows", type=int, default=3_000_000, help="one_counter rows")
    p.add_argument("--row-group", type=int, default=100_000, help="one_counter row group rows")
    p.add_argument("--url-rows", type=int, default=3_000, help="big_urls rows")
    p.add_argument("--url-bytes", type=int, default=1_048_576, help="bytes of each URL")
    p.add_argument("--url-row-group", type=int, default=64, help="big_urls row group rows")
    p.add_argument("--wide-cols", type=int, default=10_000, help="wide columns (incl. 2 keys)")
    p.add_argument("--only", nargs="+", choices=["one_counter", "big_urls", "wide"],
                   default=["one_counter", "big_urls", "wide"])
    p.add_argument("--keep", action="store_true", help="keep the intermediate gen files")
    a = p.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name in a.only:
        t0 = time.time()
        if name == "one_counter":
            make_one_counter(a.out_dir, a.bin, a.rows, a.row_group, a.keep)
        elif name == "big_urls":
            make_big_urls(a.out_dir, a.bin, a.url_rows, a.url_bytes, a.url_row_group, a.keep)
        else:
            make_wide(a.out_dir, a.wide_cols)
        print(f"  ({time.time() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
