#!/usr/bin/env bash
# A table that grows by daily loads, each followed by its maintenance policy (table P), against
# the same rows compacted to depth 1 after every load (table C).
#
#   benches/ingest/run.sh BIN INITIAL_ROWS LOADS LOAD_ROWS WORKDIR [COMPARE_EVERY] [C_EVERY]
#
# Generates INITIAL_ROWS hits rows (July 2013; every day's rows are on the same counters: world
# seed 1), loads them with `load --compact` (depth 1) and
# copies the store for C. Then LOADS times: generates LOAD_ROWS rows of the next day, loads them
# into P (the default policy runs after the load) and into C (`--no-maintain`, then `compact`
# every C_EVERY loads, 0: only before the statements). Every COMPARE_EVERY loads (and after the
# last) the point statements run cold on both (bench-queries), C compacted to depth 1 first. Writes WORKDIR/ingest.jsonl (one record per load
# and table) and WORKDIR/queries.jsonl; summarize.py prints the totals. POLICY, if set, holds
# the arguments of `layout maintenance set` for P (e.g. POLICY="--size-ratio 2 --max-depth 2").
set -euo pipefail
BIN=$(realpath "$1"); INITIAL=$2; LOADS=$3; ROWS=$4; W=$5; EVERY=${6:-10}; CEVERY=${7:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"; cd "$W"; rm -rf P C ingest.jsonl queries.jsonl
layout() { "$BIN" layout --store "$1" --table hits "${@:2}" >/dev/null; }
"$BIN" gen --rows "$INITIAL" --seed 1 --out base.parquet >/dev/null
layout P schema set --hits
layout P clustering-key set --column EventDate --column UserID --bucket-width 1d
layout P bloom-scope set --scope text
if [ -n "${POLICY:-}" ]; then
  # shellcheck disable=SC2086 # the policy's arguments, split on spaces
  layout P maintenance set $POLICY
fi
"$BIN" load --store P --table hits --input base.parquet --compact --json > base-load.json
cp -r P C
"$BIN" query --store P --table hits --format csv \
  'SELECT "CounterID", COUNT(*) AS c FROM hits GROUP BY 1 ORDER BY 2 DESC LIMIT 1 OFFSET 40' \
  | tail -1 > mid.csv
MID=$(cut -d, -f1 mid.csv)
{
  echo "SELECT \"URL\", COUNT(*) AS c FROM hits WHERE \"CounterID\" = $MID GROUP BY \"URL\" ORDER BY c DESC LIMIT 10;"
  echo "SELECT \"URL\", COUNT(*) AS c FROM hits WHERE \"CounterID\" = $MID AND \"EventDate\" >= '2013-07-10' AND \"EventDate\" <= '2013-07-12' GROUP BY \"URL\" ORDER BY c DESC LIMIT 10;"
  if [ -f "$HERE/../../../shared/clickbench/queries.sql" ]; then
    sed -n '37,43p' "$HERE/../../../shared/clickbench/queries.sql"
  else
    echo "ClickBench's queries.sql not found: Q37-Q43 left out" >&2
  fi
} > points.sql
timed() { # OUT CMD...: runs CMD, its stdout to OUT, prints wall seconds and peak RSS (kB)
  local out=$1; shift
  /usr/bin/time -f "%e %M" -o time.txt "$@" > "$out"
  cat time.txt
}
queries() { # N
  for t in P C; do
    "$BIN" bench-queries --store $t --table hits --queries points.sql --json > q.json
    python3 -c "import json,sys; print(json.dumps({'load':$1,'table':'$t','runs':json.load(open('q.json'))}))" >> queries.jsonl
  done
}
queries 0
for i in $(seq 1 "$LOADS"); do
  "$BIN" gen --rows "$ROWS" --seed $((100 + i)) --world-seed 1 --first-day $((30 + i)) --days 1 --out day.parquet >/dev/null
  read -r wall rss < <(timed p.json "$BIN" load --store P --table hits --input day.parquet --json)
  python3 -c "import json; r=json.load(open('p.json')); print(json.dumps({'load':$i,'table':'P','wall_s':$wall,'rss_kb':$rss,'stored_bytes':r['stored_bytes'],'maintenance':r['maintenance']}))" >> ingest.jsonl
  read -r wall rss < <(timed c.json "$BIN" load --store C --table hits --input day.parquet --no-maintain --json)
  query_now=0
  if [ $((i % EVERY)) -eq 0 ] || [ "$i" -eq "$LOADS" ]; then query_now=1; fi
  if { [ "$CEVERY" -gt 0 ] && [ $((i % CEVERY)) -eq 0 ]; } || [ "$query_now" -eq 1 ]; then
    read -r cwall crss < <(timed cc.json "$BIN" compact --store C --table hits --json)
  else
    echo 'null' > cc.json; cwall=0; crss=0
  fi
  python3 -c "import json; r=json.load(open('c.json')); c=json.load(open('cc.json')); print(json.dumps({'load':$i,'table':'C','wall_s':$wall,'rss_kb':$rss,'stored_bytes':r['stored_bytes'],'compact_wall_s':$cwall,'compact_rss_kb':$crss,'compact':c}))" >> ingest.jsonl
  if [ "$query_now" -eq 1 ]; then queries "$i"; fi
done
python3 "$HERE/summarize.py" "$W"
