#!/usr/bin/env bash
# Flatness over time: runs the load bench for SECONDS (default 600) at JOBS fires per second
# (default 1000) and samples its resident memory and CPU every INTERVAL seconds (default 30).
# Usage: cargo build --release --example loadbench && benches/flatness.sh [JOBS] [SECONDS] [INTERVAL]
# Prints one line per sample (elapsed s, RSS MB, CPU % of one core over the interval), then the
# bench's own JSON summary line.
set -euo pipefail
JOBS=${1:-1000}
SECONDS_TOTAL=${2:-600}
INTERVAL=${3:-30}
BIN=$(dirname "$0")/../target/release/examples/loadbench
[ -x "$BIN" ] || { echo "build first: cargo build --release --example loadbench" >&2; exit 2; }
OUT=$(mktemp)
"$BIN" --jobs "$JOBS" --seconds "$SECONDS_TOTAL" >"$OUT" 2>&1 &
PID=$!
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat" 2>/dev/null || echo 0; }
echo "elapsed_s rss_mb cpu_pct"
last=$(ticks); t=0
while kill -0 "$PID" 2>/dev/null; do
  sleep "$INTERVAL"; t=$((t + INTERVAL))
  kill -0 "$PID" 2>/dev/null || break
  now=$(ticks)
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status" 2>/dev/null || echo 0)
  echo "$t $rss $(awk -v a="$last" -v b="$now" -v hz="$HZ" -v i="$INTERVAL" 'BEGIN {printf "%.1f", (b - a) * 100 / hz / i}')"
  last=$now
done
wait "$PID" || true
grep -E '^\{' "$OUT" || cat "$OUT"
rm -f "$OUT"
