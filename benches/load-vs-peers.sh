#!/usr/bin/env bash
# Load benchmark against peers, all in one session on one input.
#
#   benches/load-vs-peers.sh [ROWS] [PEERS] [ROUNDS]   (defaults: 2000000 duckdb,polars,chdb 1)
#
# With ROUNDS > 1 every tool runs once per round, interleaved (ravel-load, peer, peer, …, then
# again), and the table shows each tool's median wall time (and that round's peak RSS): on a shared machine
# only figures taken side by side in one session compare.
#
# Generates ROWS hits rows (raw convention, seed 1), loads them with the release ravel-load into
# a fresh local store with the hits layout (CounterID, EventTime div 1d, EventDate, UserID,
# EventTime; Bloom filters on text columns; ~24 MB objects; zstd 3), then runs
# ../shared/bench/peers.py for each peer (same sort key, zstd, 240k-row row groups). Prints wall
# seconds, rows/s, output bytes and peak RSS per tool, and each peer's ratio to ravel-load.
# Peers need `pip install duckdb polars chdb pyarrow`.
set -euo pipefail
ROWS=${1:-2000000}
PEERS=${2:-duckdb,polars,chdb}
ROUNDS=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
peers_py=${PEERS_PY:-$root/../shared/bench/peers.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --release -p ravel-load --manifest-path "$root/Cargo.toml"
bin=$root/target/release/ravel-load
"$bin" gen --rows "$ROWS" --seed 1 --out "$work/hits.parquet" >&2

# name wall_s rss_kb bytes, one line per tool and round
results=()
IFS=, read -ra peers <<<"$PEERS"
for round in $(seq "$ROUNDS"); do
  rm -rf "$work/store"
  "$bin" layout --store "$work/store" --table hits clustering-key set \
    --column EventDate --column UserID --bucket-width 1d >&2
  /usr/bin/time -f "%e %M" -o "$work/time" \
    "$bin" load --store "$work/store" --table hits --input "$work/hits.parquet" >"$work/out" 2>&1
  read -r wall rss <"$work/time"
  bytes=$(du -sb "$work/store/hits/data" | cut -f1)
  results+=("ravel-load $wall $rss $bytes")
  for peer in "${peers[@]}"; do
    if ! /usr/bin/time -f "%e %M" -o "$work/time" \
      python3 "$peers_py" "$peer" "$work/hits.parquet" "$work/out-$peer" >"$work/peer.json" 2>"$work/peer.err"; then
      echo "peer $peer failed: $(tail -1 "$work/peer.err")" >&2
      continue
    fi
    read -r wall rss <"$work/time"
    bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["out_bytes"])' "$work/peer.json")
    results+=("$peer $wall $rss $bytes")
    rm -rf "$work/out-$peer"
  done
  echo "round $round: ${results[*]: -$((${#peers[@]} + 1))}" >&2
done

# Median wall and RSS per tool over the rounds (bytes do not vary).
printf '%s\n' "${results[@]}" | sort -k1,1 -k2,2n | awk -v rows="$ROWS" -v rounds="$ROUNDS" '
  { n[$1]++; w[$1, n[$1]] = $2; b[$1] = $4; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
  { rs[$1, n[$1]] = $3 }
  function med(tool, arr,   m) { m = n[tool]; return (m % 2) ? arr[tool, (m + 1) / 2] : (arr[tool, m / 2] + arr[tool, m / 2 + 1]) / 2 }
  END {
    x = "ravel-load"; w0 = med(x, w); r0 = med(x, rs); b0 = b[x]
    printf "%-11s %9s %11s %14s %12s %8s %8s %8s   (median wall of %d rounds; RSS of that round)\n", "tool", "wall_s", "rows/s", "bytes", "peak_rss_MB", "wall/x", "bytes/x", "rss/x", rounds
    for (i = 1; i <= k; i++) {
      t = order[i]; wm = med(t, w); rm = med(t, rs)
      printf "%-11s %9.2f %11.0f %14d %12.0f %8.2f %8.2f %8.2f\n", t, wm, rows / wm, b[t], rm / 1024, wm / w0, b[t] / b0, rm / r0
    }
    print "(x = ravel-load; wall/x > 1 means the tool is slower than ravel-load)"
  }'
