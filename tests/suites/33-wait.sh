#!/usr/bin/env bash
# A claim waits like any writer: while another process holds a write
# transaction on the ledger's file, idem_claim (local and external, with
# and without guards, in autocommit and inside a deferred BEGIN), INSERT
# INTO the ledger and idem_renew wait through busy_timeout and succeed after
# its commit, in WAL and rollback-journal mode. The program is $BUILD/wait
# (tests/stress/wait.c); it prints the PASS/FAIL lines.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog wait
# shellcheck disable=SC2086  # TEST_WRAP is a command line
${TEST_WRAP:-} "$prog" --ext "$EXT" --db "$tmp/wait.db"
