#!/usr/bin/env bash
# The workflow bench on a database server with its default durability, and what the server
# spends: creates a fresh database on the server at BASE_URL (a PostgreSQL or MySQL/MariaDB URL
# without a database name at the end, e.g. postgres://postgres@127.0.0.1:35432), runs
#   target/release/examples/wfbench (or $WFBENCH) --shape many --runs RUNS --nodes 5 --database <fresh> [EXTRA…]
# and samples the server's CPU (its postmaster/mariadbd process and its children, from /proc)
# every 50 ms; the bench prints its measured window (`window <from ms> <to ms>` on stderr), and
# the server's CPU over that window per node run is printed after the bench's JSON line. On
# PostgreSQL with pg_stat_statements loaded, the statements' time over the whole bench is
# printed too (its setup and final check included: they are the few statements called once
# per run, e.g. the sea-orm reads of each run's rows), and PostgreSQL's WAL flushes over the
# bench (`pg_stat_wal`, the whole server's; their time with `track_wal_io_timing = on`).
#
# Usage: benches/wf_bench.sh BASE_URL SERVER_PID RUNS [wfbench options…, e.g. --clients 64]
set -euo pipefail
BASE=$1; SERVER_PID=$2; RUNS=$3; shift 3
BIN=${WFBENCH:-$(dirname "$0")/../target/release/examples/wfbench}
[ -x "$BIN" ] || { echo "build first: cargo build --release --example wfbench" >&2; exit 2; }
NAME="xjob_wf_$(date +%s)_$RANDOM"
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "CREATE DATABASE $NAME"
             psql "$BASE/$NAME" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>&1 || true
             psql "$BASE/$NAME" -qc "SELECT pg_stat_statements_reset()" >/dev/null 2>&1 || true ;;
  mysql*) REST=${BASE#mysql://}; CRED=${REST%@*}; HOSTPORT=${REST#*@}
          my() { mariadb --protocol=tcp -h "${HOSTPORT%:*}" -P "${HOSTPORT##*:}" -u "${CRED%%:*}" -p"${CRED#*:}" "$@"; }
          my -e "CREATE DATABASE $NAME" ;;
esac
# the server's CPU over the window: every process of the server (it and its children) is
# sampled every 50 ms and counted at its last sample, so one that exits keeps what it used
OUT=$(mktemp)
python3 - "$SERVER_PID" "$OUT.ticks" <<'PY' &
import os, sys, time
server, path = sys.argv[1], sys.argv[2]
hz = os.sysconf("SC_CLK_TCK")
seen = {}
with open(path, "w") as out:
    while not os.path.exists(path + ".stop"):
        for p in [server] + open(f"/proc/{server}/task/{server}/children").read().split():
            try:
                s = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            f = s[s.rindex(")") + 2:].split()
            seen[(p, f[19])] = int(f[11]) + int(f[12])
        out.write(f"{int(time.time() * 1000)} {sum(seen.values()) / hz}\n")
        out.flush()
        time.sleep(0.05)
PY
SAMPLER=$!
# PostgreSQL's WAL before and after (server-wide, so the bench's setup and final reads count):
# how many flushes the bench's commits made, and their time where `track_wal_io_timing` is on
wal() { psql "$BASE/postgres" -At -F ' ' -c "SELECT wal_sync, wal_sync_time, wal_bytes FROM pg_stat_wal" 2>/dev/null || true; }
case "$BASE" in postgres*) WAL0=$(wal) ;; esac
"$BIN" --shape many --runs "$RUNS" --nodes 5 --database "$BASE/$NAME" "$@" >"$OUT" 2>"$OUT.err" || true
touch "$OUT.ticks.stop"
wait "$SAMPLER" || true
line=$(grep -E '^\{' "$OUT" || true)
echo "$line"
window=$(grep -E '^window ' "$OUT.err" | tail -1 || true)
nr=$(echo "$line" | sed -n 's/.*"node_runs":\([0-9]*\).*/\1/p')
if [ -n "$window" ] && [ -n "$nr" ]; then
  # the samples nearest the window's ends
  awk -v from="$(echo "$window" | cut -d' ' -f2)" -v to="$(echo "$window" | cut -d' ' -f3)" \
      -v nr="$nr" '
    function near(t, target, best) { return (best == "" || (t - target) ^ 2 < (best - target) ^ 2) }
    { if (near($1, from, fa)) { fa = $1; a = $2 } if (near($1, to, fb)) { fb = $1; b = $2 } }
    END { s = b - a; printf "db_cpu_s %.2f over %.2f s, db_us_per_node_run %.1f\n", s, (fb - fa) / 1000, s * 1e6 / nr }' \
    "$OUT.ticks"
fi
WAL1=""
case "$BASE" in postgres*) WAL1=$(wal) ;; esac
if [ -n "${WAL0:-}" ] && [ -n "$WAL1" ] && [ -n "$nr" ]; then
  read -r s0 t0 b0 <<<"$WAL0"; read -r s1 t1 b1 <<<"$WAL1"
  # a one-caller start waits for one flush: its time is most of a start's (BENCHMARKS.md)
  awk -v s="$((s1 - s0))" -v t="$t0 $t1" -v b="$((b1 - b0))" -v nr="$nr" 'BEGIN {
    split(t, tt, " "); ms = tt[2] - tt[1]
    printf "wal_flushes %d (%.2f per node run), %.1f MB (%.1f kB per node run)", s, s / nr, b / 1e6, b / 1e3 / nr
    if (ms > 0 && s > 0) printf ", %.0f us per flush", 1000 * ms / s; else printf ", flush time: track_wal_io_timing off"
    printf "\n" }'
fi
if [[ "$BASE" == postgres* ]]; then
  echo "statements (total ms | calls | rows | query):"
  psql "$BASE/$NAME" -At -F ' | ' -c "SELECT round(total_exec_time::numeric, 1), calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT 12" 2>/dev/null || true
fi
grep -v -E '^(\{|window )' "$OUT.err" | tail -5 >&2 || true
case "$BASE" in
  postgres*) psql "$BASE/postgres" -qc "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
  mysql*) my -e "DROP DATABASE $NAME" >/dev/null 2>&1 || true ;;
esac
rm -f "$OUT" "$OUT.err" "$OUT.ticks" "$OUT.ticks.stop"
