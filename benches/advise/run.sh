#!/usr/bin/env bash
# advise's estimates against measured bytes: generates ROWS hits rows, loads them under the hits
# layout, and for each log (the fixtures' and ClickBench's 43 statements when ../shared is
# there) runs check.py: advise, a load under each of the three best candidates, bench-queries.
# Usage: benches/advise/run.sh BIN [ROWS] [WORKDIR] [advise flags...]
set -euo pipefail
BIN=$1; ROWS=${2:-2000000}; WORK=${3:-$(mktemp -d)}; shift $(( $# < 3 ? $# : 3 ))
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
mkdir -p "$WORK"; STORE=$WORK/store; DATA=$WORK/hits.parquet
[ -f "$DATA" ] || "$BIN" gen --rows "$ROWS" --seed 1 --out "$DATA" >/dev/null
if [ ! -d "$STORE/hits" ]; then
  "$BIN" layout --store "$STORE" --table hits schema set --hits >/dev/null
  "$BIN" layout --store "$STORE" --table hits clustering-key set --column EventDate --column UserID --bucket-width 1d >/dev/null
  "$BIN" load --store "$STORE" --table hits --input "$DATA" --compact >/dev/null
fi
LOGS=("$ROOT"/fixtures/advise/*.sql)
[ -f "$ROOT/../shared/clickbench/queries.sql" ] && LOGS+=("$ROOT/../shared/clickbench/queries.sql")
for log in "${LOGS[@]}"; do
  python3 "$HERE/check.py" "$BIN" "$STORE" "$log" "$DATA" "$@"
  echo
done
