#!/usr/bin/env bash
# Every ledger and guard operation waits like any writer: while another
# process holds a write transaction on the ledger's file, idem_claim (local
# and external, with and without guards), INSERT INTO the ledger,
# idem_settle, idem_resolve, idem_renew, idem_purge, idem_guard,
# idem_unguard and idem_upgrade wait through busy_timeout and succeed after
# its commit: in autocommit and as the first statement of a deferred BEGIN,
# on a connection whose ledgers are connected, on a fresh one, and after
# another connection changed the schema; a deferred BEGIN that read first
# gets the BEGIN IMMEDIATE message. The program is $BUILD/wait
# (tests/c/wait.c), once per journal mode (WAL, rollback journal).
#
# Then $BUILD/settle_race (tests/c/settle_race.c), once per journal mode:
# an autocommit idem_settle or idem_resolve whose row another connection
# changes (or whose local claim it adds a member to) between the call's
# read and its write (the other connection's commit runs in the call's
# busy handler) answers what the sequential order answers.
#
# Then the same from the bindings, on a fresh connection: Python's sqlite3
# in its default isolation mode (tests/python/test_wait_python.py) and
# better-sqlite3's db.transaction(fn), a plain BEGIN, on its own SQLite 3.53
# (tests/js/test_wait_node.mjs). An absent runtime skips.
#
# The six run at once (their cases mostly wait); each prints PASS/FAIL
# lines, shown in this order when all are done.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog wait
# shellcheck source=tests/lib/interp.sh
. tests/lib/interp.sh
plain_ext wait python node

rc=0
names=()
# run_bg NAME CMD...: run one test program in the background
run_bg() {
  local name=$1
  shift
  names+=("$name")
  (
    timeout 300 "$@" >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.status"
  ) &
}
race=$BUILD/settle_race
if [ ! -x "$race" ]; then
  echo "FAIL settle-race:setup: $race is missing (make test-programs)"
  rc=1
fi
for mode in wal delete; do
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  run_bg "$mode" ${TEST_WRAP:-} "$prog" --ext "$EXT" --mode "$mode" --db "$tmp/wait.db"
  if [ -x "$race" ]; then
    # shellcheck disable=SC2086
    run_bg "settle-race-$mode" ${TEST_WRAP:-} "$race" --ext "$EXT" --mode "$mode" \
      --db "$tmp/settle-race.db"
  fi
done
if ! python_skip wait; then
  run_bg python "$PY" tests/python/test_wait_python.py "$ext"
fi
node_bsql wait node tests/js
if [ "$node_ready" = 1 ]; then
  run_bg node node tests/js/test_wait_node.mjs "$ext"
fi
wait
# as run_checked (tests/lib/interp.sh): a crash without a FAIL line, or a
# run with no check, is a FAIL
for name in "${names[@]}"; do
  cat "$tmp/$name.out"
  status=$(cat "$tmp/$name.status" 2>/dev/null || echo 1)
  if [ "$status" -ne 0 ] && ! grep -q '^FAIL ' "$tmp/$name.out"; then
    echo "FAIL wait.$name: the test exited with status $status"
  elif ! grep -q '^PASS ' "$tmp/$name.out"; then
    echo "FAIL wait.$name: the test ran no check"
    status=1
  fi
  [ "$status" -eq 0 ] || rc=1
done
exit $rc
