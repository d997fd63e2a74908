#!/usr/bin/env bash
# Schema-driven fuzzing of the console API: schemathesis generates requests
# from /openapi.json against a running `xjob serve` and checks every answer against the document:
# no 5xx or dropped connection, documented status codes and bodies, schema-violating requests
# refused, undeclared methods answered 405. Schema-valid requests refused for rules a schema
# cannot state (a cron expression's validity, a referenced group or job that does not exist, a
# `from` after `to`) are not failures here: positive_data_acceptance is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/debug/xjob}
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore schemathesis==4.32.5
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/xjob.toml" <<TOML
[http]
bind = "127.0.0.1:$port"
[security]
admin_password = "fuzz-admin-password"
access_token = "fuzz-token"
TOML
# exec: $! is then the server itself, which the trap stops (a plain subshell left it running)
(cd "$dir" && RUST_LOG=warn exec "$OLDPWD/$BIN" serve --config xjob.toml > serve.log 2>&1) &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$port/health" > /dev/null && break
  sleep 0.1
done
login() {
  curl -fs -X POST -H 'Content-Type: application/json' \
    -d '{"username":"admin","password":"fuzz-admin-password"}' \
    "http://127.0.0.1:$port/v1/auth/login" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'
}
fuzz() {
  st run "http://127.0.0.1:$port/openapi.json" --no-color \
    -H "Authorization: Bearer $(login)" \
    --exclude-path /v1/auth/logout --exclude-path /v1/auth/password \
    --exclude-checks positive_data_acceptance \
    --max-examples 30 --seed 1 "$@"
}
# A user's update or deletion may change the fuzzer's own user (a new password ends its
# sessions): those two go last, with a session of their own, so every other operation runs
# signed in instead of answering 401 after the first such call.
fuzz --exclude-path '/v1/users/{id}'
fuzz --include-path '/v1/users/{id}'
if grep -q panicked "$dir/serve.log"; then
  echo "xjob serve panicked during the fuzz run:" >&2
  grep -A3 panicked "$dir/serve.log" >&2
  exit 1
fi
