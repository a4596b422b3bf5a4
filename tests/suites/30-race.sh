#!/usr/bin/env bash
# Races: 8 processes claim the same 1000 keys of one ledger file at once,
# in WAL and in rollback-journal (DELETE) mode, three ways (bare
# idem_claim; INSERT INTO L; claim then settle while the others claim).
# Each key must be admitted exactly once, no call may fail (SQLITE_BUSY is
# waited out by the busy handler), the ledger must hold exactly one
# attempt-1 row per key with the admitter's token, and integrity_check must
# be ok. The program is $BUILD/race (tests/c/race.c); it prints the
# PASS/FAIL lines. Under TEST_WRAP (valgrind) the sizes shrink.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog race
procs=8 keys=1000
if [ -n "${TEST_WRAP:-}" ]; then keys=40; fi
rc=0
seed=${RACE_SEED:-$(date +%s)}
echo "  race: seed $seed (RACE_SEED=$seed reproduces the orders)"
for mode in wal delete; do
  for variant in claim insert settle; do
    # shellcheck disable=SC2086  # TEST_WRAP is a command line
    ${TEST_WRAP:-} "$prog" --ext "$EXT" --db "$tmp/race-$mode-$variant.db" --mode "$mode" \
      --variant "$variant" --procs "$procs" --keys "$keys" --seed "$seed" || rc=1
  done
done
exit $rc
