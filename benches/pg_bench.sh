#!/usr/bin/env bash
# The load bench on a database server with its default durability, and what the server spends:
# creates a fresh database on the server at BASE_URL (a PostgreSQL or MySQL/MariaDB URL without
# a database name at the end, e.g. postgres://postgres@127.0.0.1:35432), runs
#   target/release/examples/loadbench (or $LOADBENCH) --jobs JOBS --seconds SECONDS --database <fresh> [EXTRA…]
# and samples the server's CPU (its postmaster/mariadbd process and all children, from /proc)
# over the bench's steady part (from 3 s after its jobs are created and started to 3 s before
# its end). On PostgreSQL with
# pg_stat_statements loaded, the statements' time over that window is printed too.
#
# Usage: benches/pg_bench.sh BASE_URL SERVER_PID JOBS SECONDS [loadbench options…]
# Prints the bench's JSON line, then `db_cpu_s` and `db_us_per_fire` (CPU of the server per fire
# in the window) and the top statements by total time (pg_stat_statements on PostgreSQL,
# performance_schema's digests on MySQL/MariaDB when they are on).
set -euo pipefail
BASE=$1; SERVER_PID=$2; JOBS=$3; SECS=$4; shift 4
BIN=${LOADBENCH:-$(dirname "$0")/../target/release/examples/loadbench}
[ -x "$BIN" ] || { echo "build first: cargo build --release --example loadbench" >&2; exit 2; }
NAME="xjob_bench_$(date +%s)_$RANDOM"
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "CREATE DATABASE $NAME"
             psql "$BASE/$NAME" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>&1 || true ;;
  mysql*) REST=${BASE#mysql://}; CRED=${REST%@*}; HOSTPORT=${REST#*@}
          my() { mariadb --protocol=tcp -h "${HOSTPORT%:*}" -P "${HOSTPORT##*:}" -u "${CRED%%:*}" -p"${CRED#*:}" "$@"; }
          my -e "CREATE DATABASE $NAME" ;;
esac
HZ=$(getconf CLK_TCK)
# the server's CPU ticks: its own and reaped children's, plus live children's
db_ticks() {
  local t
  t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$SERVER_PID/stat")
  for c in $(pgrep -P "$SERVER_PID"); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
OUT=$(mktemp)
"$BIN" --jobs "$JOBS" --seconds "$SECS" --database "$BASE/$NAME" "$@" >"$OUT" 2>"$OUT.err" &
PID=$!
# the bench's clock starts once its jobs are created and started (it says so on stderr): the
# window here is its steady part, from 3 s after that to 3 s before its end
until grep -q "after creating and starting the jobs" "$OUT.err" 2>/dev/null; do
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.2
done
sleep 3
case "$BASE" in
  postgres*) psql "$BASE/$NAME" -qc "SELECT pg_stat_statements_reset()" >/dev/null 2>&1 || true ;;
  mysql*) my -e "TRUNCATE performance_schema.events_statements_summary_by_digest; TRUNCATE performance_schema.prepared_statements_instances" >/dev/null 2>&1 || true ;;
esac
a=$(db_ticks)
window=$((SECS - 6))
sleep "$window"
b=$(db_ticks)
if [[ "$BASE" == postgres* ]]; then
  psql "$BASE/$NAME" -At -F ' | ' -c "SELECT round(total_exec_time::numeric, 1), calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT 12" > "$OUT.stmts" 2>/dev/null || true
else
  # MySQL/MariaDB with performance_schema on: the statement digests over the window
  # (prepared statements, as the driver runs them, are timed per statement instance)
  my -N -e "SELECT t, n, r, q FROM (SELECT ROUND(SUM_TIMER_WAIT / 1e9, 1) AS t, COUNT_STAR AS n, SUM_ROWS_AFFECTED + SUM_ROWS_SENT AS r, LEFT(DIGEST_TEXT, 110) AS q FROM performance_schema.events_statements_summary_by_digest WHERE SCHEMA_NAME = '$NAME' UNION ALL SELECT ROUND(SUM(SUM_TIMER_EXECUTE) / 1e9, 1), SUM(COUNT_EXECUTE), SUM(SUM_ROWS_AFFECTED + SUM_ROWS_SENT), LEFT(REGEXP_REPLACE(SQL_TEXT, '\\\\s+', ' '), 110) FROM performance_schema.prepared_statements_instances WHERE OWNER_OBJECT_SCHEMA IS NULL OR OWNER_OBJECT_SCHEMA = '$NAME' GROUP BY 4) s ORDER BY t DESC LIMIT 12" 2>/dev/null | tr '\t' '|' > "$OUT.stmts" || true
fi
wait "$PID" || true
line=$(grep -E '^\{' "$OUT" || true)
echo "$line"
tps=$(echo "$line" | sed -n 's/.*"triggers_per_sec":\([0-9.]*\).*/\1/p')
awk -v a="$a" -v b="$b" -v hz="$HZ" -v tps="${tps:-0}" -v w="$window" 'BEGIN {
  s = (b - a) / hz; printf "db_cpu_s %.2f db_us_per_fire %.1f\n", s, (tps > 0 ? s * 1e6 / (tps * w) : 0) }'
if [ -s "$OUT.stmts" ]; then
  echo "statements over the window (total ms | calls | rows | query):"
  cat "$OUT.stmts"
fi
grep -v '^{' "$OUT.err" | tail -5 >&2 || true
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
  mysql*) my -e "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
esac
rm -f "$OUT" "$OUT.err" "$OUT.stmts"
