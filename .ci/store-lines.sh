#!/usr/bin/env bash
# Lines of src/store/ that exist for one connection only (the run-row writer's SQLite file, or
# the sea-orm pool), counted without blank lines, comments and test modules. What a rule
# written once on the store's port (src/store/port/mod.rs) runs is not counted; the port's own two
# implementations (src/store/port/file.rs, pool.rs) are. Usage: .ci/store-lines.sh [--total]
set -euo pipefail
cd "$(dirname "$0")/.."
# file → which connection it serves
FILES=(
  "src/store/port/file.rs:file (the port on the writer's connection)"
  "src/store/port/pool.rs:pool (the port through sea-orm)"
  "src/store/writer/sqlite_file.rs:file"
  "src/store/writer/journal.rs:file"
  "src/store/sqlite_text.rs:file"
  "src/store/scan/file.rs:file"
  "src/store/log_by_job.rs:file"
  "src/store/writer/pool.rs:pool"
  "src/store/scan/pool.rs:pool"
)
count() {
  awk '
    skip { next }
    pending && /^mod / { skip = 1; next }
    { pending = 0 }
    /^#\[cfg\(test\)\]/ { pending = 1; next }
    /^[[:space:]]*$/ { next }
    /^[[:space:]]*\/\// { next }
    { n++ }
    END { print n + 0 }
  ' "$1"
}
total=0
for entry in "${FILES[@]}"; do
  f=${entry%%:*}
  what=${entry#*:}
  [ -f "$f" ] || continue
  n=$(count "$f")
  total=$((total + n))
  [ "${1:-}" = "--total" ] || printf '%6d  %-40s %s\n' "$n" "$f" "$what"
done
printf '%6d  lines for one connection only\n' "$total"
