#!/usr/bin/env bash
# What clustering buys per query.
#
# One generated hits table is loaded twice, with the hits layout (stream CounterID, time EventTime,
# clustering key EventDate, UserID, 1-day buckets) and with no clustering key (arrival order), both
# with Bloom scope `text`; ClickBench's 43 statements (read by path from
# ../shared/clickbench/queries.sql, never copied) run against both with `bench-queries`, and
# every statement's answer is compared between the two tables. Then, on the clustered table,
# 20 point statements on URL (values each held by one object) and the CounterID = 62
# statements (Q37-Q43) run with and without manifest pruning. `summary.py` prints the tables.
#
# Usage: benches/clustering/run.sh [BIN] [ROWS] [WORKDIR] [extra load flags...]
# Defaults: target/release/ravel-load, 2000000 rows, $TMPDIR/ravel-clustering. QUERIES names the
# statements file. Figures measured with it are in benches/RESULTS.md.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:-$ROOT/target/release/ravel-load}
ROWS=${2:-2000000}
W=${3:-${TMPDIR:-/tmp}/ravel-clustering}
shift $(( $# < 3 ? $# : 3 ))
QUERIES=${QUERIES:-$ROOT/../shared/clickbench/queries.sql}
mkdir -p "$W"
[ -f "$W/hits.parquet" ] || "$BIN" gen --rows "$ROWS" --seed 1 --out "$W/hits.parquet"

for t in clustered arrival; do
  S="$W/$t"
  rm -rf "$S" "$W/$t.answers"
  mkdir -p "$W/$t.answers"
  if [ "$t" = clustered ]; then
    # A hits table's first layout change starts from hits' stream and time, so this one command
    # sets the whole hits layout in generation 1 (the objects benches/RESULTS.md measured).
    "$BIN" layout --store "$S" --table hits clustering-key set --column EventDate --column UserID --bucket-width 1d
  fi
  "$BIN" layout --store "$S" --table hits bloom-scope set --scope text
  "$BIN" load --store "$S" --table hits --input "$W/hits.parquet" --json "$@" > "$W/$t.load.json"
  "$BIN" bench-queries --store "$S" --table hits --queries "$QUERIES" --json > "$W/$t.bench.json"
  n=0
  while IFS= read -r sql; do
    n=$((n + 1))
    "$BIN" query --store "$S" --table hits --format csv "$sql" > "$W/$t.answers/$n.csv" 2> "$W/$t.answers/$n.err" || true
  done < "$QUERIES"
done

# Where the two answers differ, run the statement again without its LIMIT/OFFSET on both tables:
# equal full results mean the difference was only which of the tied rows the LIMIT kept.
n=0
while IFS= read -r sql; do
  n=$((n + 1))
  if ! cmp -s "$W/clustered.answers/$n.csv" "$W/arrival.answers/$n.csv"; then
    full=$(printf '%s' "$sql" | sed -E 's/ LIMIT [0-9]+( OFFSET [0-9]+)?;?$//')
    if [ "$full" != "$sql" ]; then
      for t in clustered arrival; do
        "$BIN" query --store "$W/$t" --table hits --format csv "$full" | sort > "$W/$t.answers/$n.full.csv"
      done
    fi
  fi
done < "$QUERIES"

# Point statements on URL: 20 values, each held by exactly one object of the clustered table.
python3 "$HERE/point_urls.py" "$W/clustered/hits/data" > "$W/urls.sql"
sed -n 37,43p "$QUERIES" > "$W/q37-43.sql"
for f in urls q37-43; do
  "$BIN" bench-queries --store "$W/clustered" --table hits --queries "$W/$f.sql" --json > "$W/$f.pruned.json"
  "$BIN" bench-queries --store "$W/clustered" --table hits --queries "$W/$f.sql" --json --no-manifest-pruning > "$W/$f.unpruned.json"
done
python3 "$HERE/summary.py" "$W"
