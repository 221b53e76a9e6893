"""Bytes of a ravel object's UInt8/UInt16 columns stored as the signed types Delta names them
(byte/short/integer), which delta-kernel-rs's default engine reads, against stored as they are.
Both written by pyarrow (zstd 3, one row group), so only the column types differ.

    python benches/delta/unsigned_cost.py OBJECT.parquet
"""
import io
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

table = pq.read_table(sys.argv[1])
wider = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32()}
signed = pa.schema([pa.field(f.name, wider.get(f.type, f.type), f.nullable) for f in table.schema])


def size(t):
    out = io.BytesIO()
    pq.write_table(t, out, compression="zstd", compression_level=3, row_group_size=t.num_rows)
    return out.tell()


columns = [f.name for f in table.schema if f.type in wider]
a, b = size(table), size(table.cast(signed))
print(f"{table.num_rows} rows; unsigned columns {columns}: as stored {a} bytes, signed {b} bytes, ratio {b / a:.6f}")
sys.stdout.flush()
os._exit(0)
