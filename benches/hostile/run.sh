#!/usr/bin/env bash
# Peak RSS of `ravel-load load` on hostile inputs, checked against "load budget + headroom".
#
#   benches/hostile/run.sh BIN [BUDGET_BYTES]
#
# BIN: a ravel-load binary (copy it out of target/ first if a rebuild may replace it).
# BUDGET_BYTES: --load-budget of every load (default 1000000000).
#
# Environment:
#   WORK=$TMPDIR/hostile       stores go to $WORK/store-<input>, logs to $WORK/logs
#   INPUTS=$WORK/inputs        the inputs; made by make_inputs.py (with MAKE_ARGS) when missing
#   MAKE_ARGS=                 extra make_inputs.py flags, e.g. "--rows 1000000"
#   CASES="one_counter big_urls wide"
#   HEADROOM_BYTES=536870912   the 512 MiB allowed over the budget
#   KEEP_STORES=0              1: keep the stores after the run
#
# Exit status: 0 when every load exits 0 within budget+headroom and every verify exits 0, else 1.
set -u -o pipefail

if [ $# -lt 1 ]; then
  sed -n '2,16p' "$0"; exit 2
fi
BIN=$(readlink -f "$1")
BUDGET=${2:-1000000000}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/hostile}
INPUTS=${INPUTS:-$WORK/inputs}
CASES=${CASES:-"one_counter big_urls wide"}
HEADROOM=${HEADROOM_BYTES:-536870912}
KEEP_STORES=${KEEP_STORES:-0}
LOGS=$WORK/logs
LIMIT=$((BUDGET + HEADROOM))
mkdir -p "$WORK" "$INPUTS" "$LOGS"

[ -x "$BIN" ] || { echo "not executable: $BIN" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU /usr/bin/time" >&2; exit 2; }

missing=()
for c in $CASES; do [ -f "$INPUTS/$c.parquet" ] || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== making inputs: ${missing[*]}"
  # shellcheck disable=SC2086
  python3 "$HERE/make_inputs.py" "$INPUTS" --bin "$BIN" --only "${missing[@]}" ${MAKE_ARGS:-} \
    || { echo "make_inputs.py failed" >&2; exit 2; }
fi

layout() { # store table args...
  local store=$1 table=$2; shift 2
  echo "+ $BIN layout --store $store --table $table $*" >>"$LOGS/$table.layout.log"
  "$BIN" layout --store "$store" --table "$table" "$@" >>"$LOGS/$table.layout.log" 2>&1 \
    || { echo "layout failed ($table: $*), see $LOGS/$table.layout.log" >&2; tail -5 "$LOGS/$table.layout.log" >&2; return 1; }
}

rows_of() {
  python3 -c 'import sys,pyarrow.parquet as pq; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)' "$1"
}

declare -a RESULTS
overall=0
for c in $CASES; do
  input=$INPUTS/$c.parquet
  table=$c
  store=$WORK/store-$c
  rm -rf "$store"; mkdir -p "$store"
  : >"$LOGS/$table.layout.log"
  echo "== $c: $input"
  ok=1
  layout "$store" "$table" schema set --from "$input" || ok=0
  layout "$store" "$table" stream set --column CounterID || ok=0
  layout "$store" "$table" time set --column EventTime || ok=0
  if [ "$c" = wide ]; then
    layout "$store" "$table" clustering-key clear || ok=0
  else
    layout "$store" "$table" clustering-key set --column EventDate --column UserID --bucket-width 1d || ok=0
  fi
  layout "$store" "$table" bloom-scope set --scope text || ok=0
  "$BIN" layout --store "$store" --table "$table" show >"$LOGS/$table.layout.json" 2>&1

  rows=$(rows_of "$input")
  ibytes=$(stat -c %s "$input")

  cmd=("$BIN" load --store "$store" --table "$table" --input "$input" --load-budget "$BUDGET" --json)
  echo "+ /usr/bin/time -v ${cmd[*]}"
  /usr/bin/time -v -o "$LOGS/$c.load.time" "${cmd[@]}" >"$LOGS/$c.load.out" 2>"$LOGS/$c.load.err"
  lrc=$?
  # /usr/bin/time prints "Command terminated by signal N" / "Command exited with non-zero status N"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$LOGS/$c.load.time")
  wall_s=$(echo "$wall" | awk -F: '{ s=0; for (i=1;i<=NF;i++) s=s*60+$i; printf "%.1f", s }')
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$LOGS/$c.load.time")
  rss_b=$((rss_kb * 1024))
  rss_mib=$(awk -v k="$rss_kb" 'BEGIN { printf "%.0f", k/1024 }')
  limit_mib=$(awk -v b="$LIMIT" 'BEGIN { printf "%.0f", b/1048576 }')
  if [ "$lrc" -eq 0 ] && [ "$rss_b" -le "$LIMIT" ] && [ "$ok" -eq 1 ]; then verdict=PASS; else verdict=FAIL; overall=1; fi
  [ "$rss_b" -gt "$LIMIT" ] && verdict="$verdict(rss)"
  [ "$lrc" -ne 0 ] && verdict="$verdict(exit)"
  if grep -q "terminated by signal" "$LOGS/$c.load.time"; then
    echo "   $(grep 'terminated by signal' "$LOGS/$c.load.time")"
  fi
  echo "   load exit $lrc, wall ${wall_s}s, peak RSS ${rss_mib} MiB (limit ${limit_mib} MiB)"
  if [ "$lrc" -ne 0 ]; then
    echo "   --- load stderr (last 20 lines):"; tail -20 "$LOGS/$c.load.err" | sed 's/^/   /'
  fi

  vcmd=("$BIN" verify --store "$store" --table "$table" --deep)
  echo "+ ${vcmd[*]}"
  vstart=$(date +%s.%N)
  "${vcmd[@]}" >"$LOGS/$c.verify.out" 2>"$LOGS/$c.verify.err"
  vrc=$?
  vwall=$(awk -v a="$vstart" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b-a }')
  echo "   verify exit $vrc (${vwall}s)"
  if [ "$vrc" -ne 0 ]; then
    overall=1
    echo "   --- verify stdout+stderr (last 20 lines):"
    cat "$LOGS/$c.verify.out" "$LOGS/$c.verify.err" | tail -20 | sed 's/^/   /'
  fi
  sbytes=$(du -sb "$store" | cut -f1)
  # from the load's JSON report (when it printed one): objects, runs, peak charged budget
  rep=$(python3 - "$LOGS/$c.load.out" <<'PY' 2>/dev/null || echo "-|-|-"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{len(r.get('objects', []))}|{r.get('runs', '-')}|{r.get('peak_budget_bytes', 0) / 1048576:.0f}")
PY
)
  RESULTS+=("$c|$rows|$ibytes|$lrc|$wall_s|$rss_mib|$limit_mib|$verdict|$vrc|$sbytes|$rep")
  [ "$KEEP_STORES" = 1 ] || rm -rf "$store"
done

echo
echo "budget $BUDGET bytes, headroom $HEADROOM bytes, limit $LIMIT bytes; binary $BIN"
{
  echo "input|rows|input_bytes|load_exit|wall_s|peak_rss_MiB|budget+512MiB_MiB|rss_check|verify_exit|store_bytes|objects|runs|peak_budget_MiB"
  for r in "${RESULTS[@]}"; do echo "$r"; done
} | column -t -s '|'
echo "logs: $LOGS"
exit $overall
