#!/usr/bin/env bash
# Load benchmark against peers, all in one session on one input.
#
#   benches/load-vs-peers.sh [ROWS] [PEERS]     (defaults: 2000000 duckdb,polars,chdb)
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
root=$(cd "$(dirname "$0")/.." && pwd)
peers_py=${PEERS_PY:-$root/../shared/bench/peers.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --release -p ravel-load --manifest-path "$root/Cargo.toml"
bin=$root/target/release/ravel-load
"$bin" gen --rows "$ROWS" --seed 1 --out "$work/hits.parquet" >&2
"$bin" layout --store "$work/store" --table hits clustering-key set \
  --column EventDate --column UserID --bucket-width 1d >&2

# name wall_s rss_kb bytes
results=()
/usr/bin/time -f "%e %M" -o "$work/time" \
  "$bin" load --store "$work/store" --table hits --input "$work/hits.parquet" >"$work/out" 2>&1
read -r wall rss <"$work/time"
bytes=$(du -sb "$work/store/hits/data" | cut -f1)
results+=("ravel-load $wall $rss $bytes")

IFS=, read -ra peers <<<"$PEERS"
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

printf '%s\n' "${results[@]}" | awk -v rows="$ROWS" '
  NR == 1 { w0 = $2; r0 = $3; b0 = $4 }
  { line[NR] = $0; name[NR] = $1; w[NR] = $2; r[NR] = $3; b[NR] = $4 }
  END {
    printf "%-11s %9s %11s %14s %12s %8s %8s %8s\n", "tool", "wall_s", "rows/s", "bytes", "peak_rss_MB", "wall/x", "bytes/x", "rss/x"
    for (i = 1; i <= NR; i++)
      printf "%-11s %9.2f %11.0f %14d %12.0f %8.2f %8.2f %8.2f\n", name[i], w[i], rows / w[i], b[i], r[i] / 1024, w[i] / w0, b[i] / b0, r[i] / r0
    print "(x = ravel-load; wall/x > 1 means the tool is slower than ravel-load)"
  }'
