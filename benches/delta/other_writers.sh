#!/usr/bin/env bash
# Other Delta writers on a ravel table, with the engines themselves: delta-rs (Python
# `deltalake`) appends, `optimize.compact()`, `vacuum` (lite, then full), the fence; after each
# step the answers of `ravel-load query`, polars and delta-rs, and what `verify` says.
#
#   benches/delta/other_writers.sh BIN [WORK]
#
# BIN: a ravel-load binary. WORK: a scratch directory (default $TMPDIR/other-writers), emptied.
# Needs: pip install deltalake polars pyarrow.
set -euo pipefail
BIN=$(realpath "$1")
W=${2:-${TMPDIR:-/tmp}/other-writers}
rm -rf "$W" && mkdir -p "$W" && cd "$W"
S=$W/store
"$BIN" gen --rows 200000 --seed 1 --out a.parquet >/dev/null
"$BIN" gen --rows 20000 --seed 2 --out b.parquet >/dev/null
layout() { "$BIN" layout --store "$S" --table hits "$@" >/dev/null; }
layout schema set --hits
layout clustering-key set --column EventDate --column UserID --bucket-width 1d
"$BIN" load --store "$S" --table hits --input a.parquet 2>/dev/null >/dev/null
Q='SELECT COUNT(*), SUM("UserID" % 1000), COUNT(DISTINCT "SearchPhrase") FROM hits'

step() {
  echo "== $1"
  echo "ravel-load: $("$BIN" query --store "$S" --table hits --format csv "$Q" | tail -1)"
  python3 - "$S/hits" <<'PY'
import sys, polars as pl, deltalake
path = sys.argv[1]
p = pl.read_delta(path, columns=["UserID", "SearchPhrase"])
print(f"polars:     {p.height},{int((p['UserID'] % 1000).sum())},{p['SearchPhrase'].n_unique()}")
dt = deltalake.DeltaTable(path)
print(f"delta-rs:   {dt.to_pyarrow_table(columns=['UserID']).num_rows} rows at version {dt.version()}")
# polars and deltalake together sometimes abort at interpreter exit: leave at once.
import os; sys.stdout.flush(); os._exit(0)
PY
  "$BIN" verify --store "$S" --table hits --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("verify:", len(v["violations"]), "violations,", len(v["foreign"]), "foreign objects,",
      v["rows"], "rows, depth", (v["overlap"] or {}).get("max_depth"))'
}

python_writes() { python3 - "$S/hits" "$1" <<'PY'
import sys, pyarrow.parquet as pq, deltalake
path, what = sys.argv[1], sys.argv[2]
if what == "append":
    try:
        deltalake.write_deltalake(path, pq.read_table("b.parquet"), mode="append")
        print("delta-rs append: version", deltalake.DeltaTable(path).version())
    except Exception as e:
        print("delta-rs append refused:", str(e)[:120])
else:
    m = deltalake.DeltaTable(path).optimize.compact()
    print("delta-rs optimize: added", m["numFilesAdded"], "removed", m["numFilesRemoved"])
    lite = deltalake.DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    full = deltalake.DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)
    print("delta-rs vacuum deleted", len(lite), "files; full vacuum", len(full))
PY
}

report() { python3 -c '
import json, sys
r = json.load(sys.stdin)
print(sys.argv[1] + ": adopted", r["adopted"], "depth after", r["depth_after"])' "$1"; }

step "ravel-load load"
python_writes append
step "after the append"
"$BIN" maintain --store "$S" --table hits --json 2>/dev/null | report maintain
step "after maintain"
python_writes optimize
step "after optimize and vacuum"
"$BIN" compact --store "$S" --table hits --json 2>/dev/null | report compact
step "after compact"
"$BIN" layout --store "$S" --table hits fence set
python_writes append
step "fenced"
