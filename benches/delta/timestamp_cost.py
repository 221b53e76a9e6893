"""EventTime of the first N objects of a table, written by pyarrow as stored (INT64 seconds) and
as TIMESTAMP(MILLIS) and (MICROS), plain and delta-encoded, zstd 3: what storing seconds in a
unit Delta readers read as a timestamp would cost.

    python benches/delta/timestamp_cost.py STORE N   (table `hits` of the raw convention)
"""
import glob
import io
import sys

import pyarrow as pa
import pyarrow.parquet as pq

files = sorted(glob.glob(sys.argv[1] + "/hits/data/*.parquet"))[: int(sys.argv[2])]
total = {}
for f in files:
    pf = pq.ParquetFile(f)
    seconds = pf.read(columns=["EventTime"]).column(0).combine_chunks()
    index = pf.schema_arrow.get_field_index("EventTime")
    total["stored"] = total.get("stored", 0) + pf.metadata.row_group(0).column(index).total_compressed_size
    total["objects"] = total.get("objects", 0) + sum(
        pf.metadata.row_group(0).column(c).total_compressed_size for c in range(pf.metadata.num_columns))
    as_time = seconds.cast(pa.timestamp("s"))
    for unit, array in {"s (INT64)": seconds, "ms": as_time.cast(pa.timestamp("ms")),
                        "us": as_time.cast(pa.timestamp("us"))}.items():
        for encoding in ("PLAIN", "DELTA_BINARY_PACKED"):
            out = io.BytesIO()
            pq.write_table(pa.table({"t": array}), out, compression="zstd", compression_level=3,
                           use_dictionary=False, column_encoding={"t": encoding},
                           row_group_size=1 << 40)
            key = f"{unit} {encoding}"
            total[key] = total.get(key, 0) + len(out.getvalue())
for key, value in total.items():
    print(f"{key:28} {value:>14,}")
