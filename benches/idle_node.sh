#!/usr/bin/env bash
# What an idle node costs its database: starts `xjob serve` (target/release/xjob, or $XJOB) on
# a fresh database on the server at BASE_URL (a PostgreSQL or MySQL/MariaDB URL without a
# database name, e.g. postgres://postgres@127.0.0.1:35432) with no job, waits 12 s, then over
# SECONDS counts the node's sends to the database (`strace -c -e sendto`: one per statement,
# transaction command or pooled connection's ping) and the server's CPU (its process and its
# children, from /proc); on PostgreSQL also its WAL flushes (`pg_stat_wal`) and the database's
# commits (`pg_stat_database`).
#
# Usage: benches/idle_node.sh BASE_URL SERVER_PID [SECONDS]   (root: strace attaches to xjob)
set -euo pipefail
BASE=$1; SERVER_PID=$2; SECS=${3:-30}
BIN=${XJOB:-$(dirname "$0")/../target/release/xjob}
[ -x "$BIN" ] || { echo "build first: cargo build --release --bin xjob" >&2; exit 2; }
command -v strace >/dev/null || { echo "needs strace" >&2; exit 2; }
NAME="xjob_idle_$(date +%s)_$RANDOM"
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "CREATE DATABASE $NAME"
             pg() { psql "$BASE/postgres" -Atc "$1"; } ;;
  mysql*) REST=${BASE#mysql://}; CRED=${REST%@*}; HOSTPORT=${REST#*@}
          my() { mariadb --protocol=tcp -h "${HOSTPORT%:*}" -P "${HOSTPORT##*:}" -u "${CRED%%:*}" -p"${CRED#*:}" "$@"; }
          my -e "CREATE DATABASE $NAME" ;;
esac
OUT=$(mktemp)
XJOB_DATABASE__URL="$BASE/$NAME" XJOB_HTTP__BIND=127.0.0.1:0 "$BIN" serve >"$OUT" 2>&1 &
NODE=$!
trap 'kill $NODE 2>/dev/null || true; rm -f "$OUT" "$OUT.strace"' EXIT
sleep 12
HZ=$(getconf CLK_TCK)
ticks() {
  local s=0 t
  for p in $SERVER_PID $(cat "/proc/$SERVER_PID/task/$SERVER_PID/children"); do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    s=$((s + t))
  done
  echo $s
}
d0=$(ticks)
if [[ "$BASE" == postgres* ]]; then
  w0=$(pg "SELECT wal_sync FROM pg_stat_wal"); c0=$(pg "SELECT xact_commit FROM pg_stat_database WHERE datname = '$NAME'")
fi
timeout "$SECS" strace -f -c -e trace=sendto -p "$NODE" 2>"$OUT.strace" || true
d1=$(ticks)
sends=$(awk '/sendto/ {print $4}' "$OUT.strace")
printf 'sends_per_s %.1f db_cpu_ms_per_s %.2f' "$(echo "${sends:-0} / $SECS" | bc -l)" \
  "$(echo "($d1 - $d0) * 1000 / $HZ / $SECS" | bc -l)"
if [[ "$BASE" == postgres* ]]; then
  sleep 1   # the statistics of the node's backends are flushed within a second
  w1=$(pg "SELECT wal_sync FROM pg_stat_wal"); c1=$(pg "SELECT xact_commit FROM pg_stat_database WHERE datname = '$NAME'")
  printf ' wal_flushes_per_s %.2f commits_per_s %.2f' "$(echo "($w1 - $w0) / $SECS" | bc -l)" \
    "$(echo "($c1 - $c0) / ($SECS + 1)" | bc -l)"
fi
echo
kill $NODE; wait $NODE 2>/dev/null || true
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
  mysql*) my -e "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
esac
