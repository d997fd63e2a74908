#!/usr/bin/env bash
# Starts PostgreSQL and MariaDB on loopback for the cluster tests and exports their URLs:
#   XJOB_TEST_PG_URL, XJOB_TEST_MYSQL_URL
# Source it (root, no stdin): `source .ci/databases.sh`. `xjob_stop_databases` stops both.
set -euo pipefail

XJOB_DB_ROOT=${XJOB_DB_ROOT:-/tmp/xjob-db}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
# below Linux's ephemeral range (32768–60999): a client connection's local port cannot take them
PGPORT=25432
MYPORT=23306

if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/pg_ctl" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
if ! command -v mariadbd >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null 2>&1 || true
  command -v mariadbd >/dev/null
fi

# a previous run on this machine may have left servers behind: stop them first
if [ -f "$XJOB_DB_ROOT/pg/postmaster.pid" ]; then
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$XJOB_DB_ROOT/pg" -m immediate stop >/dev/null 2>&1 || true
fi
if [ -S "$XJOB_DB_ROOT/my/my.sock" ]; then
  mariadb-admin -S "$XJOB_DB_ROOT/my/my.sock" -uroot shutdown >/dev/null 2>&1 || true
fi

# PostgreSQL
PGDATA=$XJOB_DB_ROOT/pg
rm -rf "$PGDATA"
install -d -o postgres -g postgres "$PGDATA"
runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 60 \
  -o "-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
psql -h 127.0.0.1 -p $PGPORT -U postgres -qc "CREATE DATABASE xjob_test" >/dev/null
export XJOB_TEST_PG_URL="postgres://postgres@127.0.0.1:$PGPORT/xjob_test"

# MariaDB
MYDATA=$XJOB_DB_ROOT/my
MYSOCK=$MYDATA/my.sock
rm -rf "$MYDATA"
install -d -o mysql -g mysql "$MYDATA"
mariadb-install-db --user=mysql --datadir="$MYDATA" --auth-root-authentication-method=normal \
  --skip-test-db >/dev/null 2>&1
runuser -u mysql -- mariadbd --no-defaults --datadir="$MYDATA" --port=$MYPORT --bind-address=127.0.0.1 \
  --socket="$MYSOCK" --pid-file="$MYDATA/my.pid" --log-error="$MYDATA/my.err" \
  --max-connections=300 --innodb-flush-log-at-trx-commit=0 </dev/null >/dev/null 2>&1 &
for _ in $(seq 1 120); do
  mariadb-admin -S "$MYSOCK" -uroot ping >/dev/null 2>&1 && break
  sleep 0.25
done
mariadb -S "$MYSOCK" -uroot -e "CREATE DATABASE xjob_test; CREATE USER 'xjob'@'127.0.0.1' IDENTIFIED BY 'xjob'; GRANT ALL ON *.* TO 'xjob'@'127.0.0.1';"
export XJOB_TEST_MYSQL_URL="mysql://xjob:xjob@127.0.0.1:$MYPORT/xjob_test"

xjob_stop_databases() {
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$XJOB_DB_ROOT/pg" -m immediate stop >/dev/null 2>&1 || true
  mariadb-admin -S "$XJOB_DB_ROOT/my/my.sock" -uroot shutdown >/dev/null 2>&1 || true
}
echo "databases: $XJOB_TEST_PG_URL $XJOB_TEST_MYSQL_URL"
