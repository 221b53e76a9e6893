#!/usr/bin/env bash
# A job on a local Ray against the single-machine commands, side by side on the same inputs:
#   a globally sorted load of 4 Parquet files (python -m ravel_ray load --steps 4 vs load --compact),
#   a compaction of a table of 4 runs (python -m ravel_ray compact --steps 4 vs compact),
#   and planning at 10,000 steps (plan load --steps 10000: wall and plan size).
# usage: benches/job/run.sh BIN ROWS_PER_FILE WORKDIR PYTHON   (PYTHON: a venv with ./python installed)
set -euo pipefail
BIN=$(realpath "$1"); ROWS=$2; W=$3; PY=$4
export PATH="$(dirname "$BIN"):$PATH" RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_MODE=disabled
mkdir -p "$W/in"; W=$(realpath "$W")
for s in 1 2 3 4; do
    [ -f "$W/in/p$s.parquet" ] || "$BIN" gen --rows "$ROWS" --seed "$s" --out "$W/in/p$s.parquet" >/dev/null
done
table() {  # an empty table with the hits layout
    rm -rf "$1"
    "$BIN" layout --store "$1" --table hits schema set --from "$W/in/p1.parquet" >/dev/null
    "$BIN" layout --store "$1" --table hits stream set --column CounterID >/dev/null
    "$BIN" layout --store "$1" --table hits time set --column EventTime >/dev/null
    "$BIN" layout --store "$1" --table hits clustering-key set --column EventDate --column UserID --bucket-width 1d >/dev/null
    "$BIN" layout --store "$1" --table hits bloom-scope set --scope text >/dev/null
}
wall() { local t=$(date +%s.%N); "$@" >/dev/null; echo "$(date +%s.%N) - $t" | bc; }
figures() { "$BIN" query --store "$1" --table hits --format json 'SELECT count(*) n, sum("WatchID" % 1000003) s, count(distinct "WatchID") d FROM hits'; }
depth() { "$BIN" verify --store "$1" --table hits --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["overlap"]["max_depth"])'; }
port=6391
"$PY" -m ray.scripts.scripts start --head --node-ip-address 127.0.0.1 --port $port --num-cpus 2 --include-dashboard false --disable-usage-stats >/dev/null
trap '"$PY" -m ray.scripts.scripts stop --force >/dev/null 2>&1' EXIT
RAY="$PY -m ravel_ray"
table "$W/single"; table "$W/spread"
echo "load --compact:      $(wall "$BIN" load --store "$W/single" --table hits --compact --no-maintain --input "$W"/in/p*.parquet) s"
echo "ravel_ray load (4):  $(wall $RAY load --store "$W/spread" --table hits --steps 4 --address 127.0.0.1:$port --input "$W"/in/p*.parquet) s"
echo "figures single $(figures "$W/single") depth $(depth "$W/single")"
echo "figures spread $(figures "$W/spread") depth $(depth "$W/spread")"
table "$W/runs1"; table "$W/runs2"
for s in 1 2 3 4; do
    "$BIN" load --store "$W/runs1" --table hits --no-maintain --input "$W/in/p$s.parquet" >/dev/null
    "$BIN" load --store "$W/runs2" --table hits --no-maintain --input "$W/in/p$s.parquet" >/dev/null
done
echo "compact:             $(wall "$BIN" compact --store "$W/runs1" --table hits) s"
echo "ravel_ray compact (4): $(wall $RAY compact --store "$W/runs2" --table hits --steps 4 --address 127.0.0.1:$port) s"
echo "figures compact $(figures "$W/runs1") depth $(depth "$W/runs1")"
echo "figures job     $(figures "$W/runs2") depth $(depth "$W/runs2")"
table "$W/plan10k"
# A plan cuts no more merge steps than the input fills objects: objects small enough for 10,000.
ob=$(( $(cat "$W"/in/p*.parquet | wc -c) / 10000 )); [ "$ob" -gt 0 ] || ob=1
echo "plan load --steps 10000: $(wall "$BIN" plan load --store "$W/plan10k" --table hits --steps 10000 --object-bytes $ob --out "$W/plan10k.json" --input "$W"/in/p*.parquet) s, $(stat -c %s "$W/plan10k.json") bytes, $(python3 -c "import json; j=json.load(open('$W/plan10k.json')); print(len(j['steps']))") steps"
