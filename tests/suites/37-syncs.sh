#!/usr/bin/env bash
# What a durable call costs, counted from outside (docs/design.md, "What a
# call costs"): both packages' Ledger.call on a file ledger opened with
# Ledger.open (WAL, synchronous=FULL) run under strace, which logs every
# fsync and fdatasync with the file it syncs (tests/python/syncs.py and
# syncs.mjs mark each phase with a failing chdir).
#
#   first    a first call makes exactly one sync of the database and its
#            WAL, the claim's commit: the settle's commits at
#            synchronous=NORMAL and the next synced commit carries it
#            (docs/design.md, "A settle rides on the next synced commit");
#            the check right before sending is a read while more than the
#            margin is left
#   replay   its replay makes none
#   renew    with lease_seconds=1 (no more than the margin left) the check
#            renews: two (the claim's commit and the renew's)
#
# The programs also check that a replay answers at once while another
# connection holds the write lock (busy_timeout=0), and that a new key's
# claim then fails with "database is locked". strace absent: SKIP.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP syncs: runs in make test only: the packages carry the plain build"
  exit 0
fi
plain_ext syncs python node
if ! command -v strace >/dev/null 2>&1; then
  echo "SKIP syncs: strace is not installed (Debian: apt-get install strace)"
  exit 0
fi
if ! strace -f -o /dev/null true >/dev/null 2>&1; then
  echo "SKIP syncs: strace cannot trace here (ptrace is not permitted)"
  exit 0
fi
rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# count LOG DB FROM TO: fsync/fdatasync calls on DB and DB-wal between the markers
count() {
  awk -v db="$2" -v from="/syncs-mark-$3\"" -v to="/syncs-mark-$4\"" '
    index($0, "chdir(\"" substr(from, 1)) { on = 1; next }
    index($0, "chdir(\"" substr(to, 1)) { on = 0; next }
    on && /(fsync|fdatasync)\(/ && (index($0, "<" db ">") || index($0, "<" db "-wal>")) { n++ }
    END { print n + 0 }' "$1"
}
# syncs LANG: the strace log of one program checked
syncs() {
  local lang=$1 log=$tmp/$1.strace dir=$tmp/$1 db n name from to want
  for spec in a:first:a-first:a-replay:1 a:replay:a-replay:a-end:0 b:renew:b-first:b-replay:2 b:replay_renewing:b-replay:b-end:0; do
    IFS=: read -r db name from to want <<<"$spec"
    n=$(count "$log" "$(realpath "$dir")/$db.db" "$from" "$to")
    if [ "$n" = "$want" ]; then
      echo "PASS syncs.$lang.$name"
    else
      echo "FAIL syncs.$lang.$name: $n syncs of $db.db and its WAL, want $want ($(grep -c 'sync(' "$log") in the whole log)"
      rc=1
    fi
  done
}

if ! python_skip syncs; then
  mkdir -p "$tmp/py" "$tmp/python"
  cp -r bindings/python/sqlite_idempotency "$tmp/py/"
  cp bindings/node/words.json "$tmp/py/sqlite_idempotency/"
  cp "$ext" "$tmp/py/sqlite_idempotency/idempotency.so"
  run_checked syncs python env PYTHONPATH="$tmp/py" strace -f -y -qq -e trace=fsync,fdatasync,chdir \
    -o "$tmp/python.strace" "$PY" tests/python/syncs.py "$tmp/python"
  syncs python
fi

node_bsql syncs node tests/js
if [ "$node_ready" = 1 ]; then
  # shellcheck source=tests/lib/nodepkg.sh
  . tests/lib/nodepkg.sh
  mkdir -p "$tmp/proj" "$tmp/node"
  stage_node_pkg "$tmp/proj/node_modules" "$ext"
  ln -s "$ROOT/tests/js/node_modules/better-sqlite3" "$tmp/proj/node_modules/better-sqlite3"
  for d in tests/js/node_modules/*; do
    [ -e "$tmp/proj/node_modules/$(basename "$d")" ] || ln -s "$ROOT/$d" "$tmp/proj/node_modules/$(basename "$d")"
  done
  echo '{"name": "syncs-scratch", "private": true, "type": "module"}' >"$tmp/proj/package.json"
  cp tests/js/syncs.mjs "$tmp/proj/"
  run_checked syncs node sh -c "cd '$tmp/proj' && exec strace -f -y -qq -e trace=fsync,fdatasync,chdir -o '$tmp/node.strace' node syncs.mjs '$tmp/node'"
  syncs node
fi
exit $rc
