#!/usr/bin/env bash
# The team's side-by-side harness against a peer scheduler (`peer/side_by_side.sh` in the
# directory SHARED_BENCH names; it is not part of this repository) with its xjob probe
# creating each job running in one request (`POST /v1/jobs` with `"triggerStatus": 1`), as the
# peer's probe does (`POST /ratch/v1/job/create` with `"enable": true`), instead of a create and a
# start. Everything else (the peer's runs, the executor, the windows, the output) is the shared
# harness's own. The shared files are not changed: the harness is copied to a temporary directory
# and its copy of probe_xjob.py is edited there. A shared probe that already creates each job
# running in one request (the harness's own since 2026-12; it says `"triggerStatus": 1`) is run
# as it is; one with neither form stops the script, which says so.
#
#   benches/side_by_side_one_request.sh [N] [executor|noexec]    (cwd = this checkout)
#   environment: SHARED_BENCH (required: the harness's directory) and everything side_by_side.sh takes
#   (XJOB_BIN, RATCH_BIN, WORKERS, RATCH_AGAIN, OUT_DIR, ONLY, ...)
set -euo pipefail
SHARED_BENCH="${SHARED_BENCH:?set SHARED_BENCH to the side-by-side harness directory}"
[ -f "$SHARED_BENCH/peer/side_by_side.sh" ] && [ -f "$SHARED_BENCH/peer/probe_xjob.py" ] || {
  echo "side_by_side_one_request: no harness at $SHARED_BENCH/peer (set SHARED_BENCH)" >&2
  exit 2
}
TMP="$(mktemp -d /tmp/xjob-one-request.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/peer"
cp "$SHARED_BENCH/peer/side_by_side.sh" "$SHARED_BENCH/peer/probe_xjob.py" "$TMP/peer/"
# side_by_side.sh finds the peer's scripts at ../ratch-job
ln -s "$(cd "$SHARED_BENCH/ratch-job" && pwd)" "$TMP/ratch-job"
python3 - "$TMP/peer/probe_xjob.py" <<'EOF'
import sys
path = sys.argv[1]
src = open(path).read()
if '"triggerStatus": 1' in src:
    # the harness's probe creates each job running in one request already
    sys.exit(0)
old = ('jid = pick_id(api.call("POST", "/v1/jobs", job_body(args, group_id, i)))\n'
       '                api.call("POST", f"/v1/jobs/{jid}/start")\n')
new = ('jid = pick_id(api.call("POST", "/v1/jobs",\n'
       '                                       {**job_body(args, group_id, i), "triggerStatus": 1}))\n')
if src.count(old) != 1:
    sys.exit("side_by_side_one_request: the shared probe_xjob.py neither creates each job "
             "running in one request nor creates and starts it with the two lines this script "
             "edits; update this script")
open(path, "w").write(src.replace(old, new))
EOF
XJOB_BIN="${XJOB_BIN:-$(pwd)/target/release/xjob}" bash "$TMP/peer/side_by_side.sh" "$@"
