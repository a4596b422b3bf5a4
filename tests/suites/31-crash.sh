#!/usr/bin/env bash
# Crashes: a child claims keys in a loop on a ledger file (synchronous=FULL,
# WAL and rollback journal) and is killed with SIGKILL at random moments,
# 40 rounds per mode over the same keys. After every round the database must
# pass integrity_check and hold every admission the child reported, with
# its token; no key is admitted twice; at the end a fresh claim of every key
# in the ledger is in_progress. The program is $BUILD/crash
# (tests/c/crash.c). Under TEST_WRAP (valgrind) the delays grow.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog crash
seed=${CRASH_SEED:-$(date +%s)}
echo "  crash: seed $seed (CRASH_SEED=$seed reproduces the delays)"
rc=0
if [ -n "${TEST_WRAP:-}" ]; then
  wal=(--keys 200 --delay-ms 200:1500 --rounds 22)
  del=(--keys 100 --delay-ms 200:1500 --rounds 22)
else
  wal=(--keys 150 --delay-ms 1:30 --rounds 40)
  del=(--keys 300 --delay-ms 5:80 --rounds 40)
fi
# shellcheck disable=SC2086  # TEST_WRAP is a command line
${TEST_WRAP:-} "$prog" --ext "$EXT" --db "$tmp/crash-wal.db" --mode wal --seed "$seed" "${wal[@]}" || rc=1
# shellcheck disable=SC2086
${TEST_WRAP:-} "$prog" --ext "$EXT" --db "$tmp/crash-delete.db" --mode delete --seed "$seed" "${del[@]}" || rc=1
exit $rc
