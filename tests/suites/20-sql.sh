#!/usr/bin/env bash
# The SQL test files tests/sql/NN-*.sql, run by the runner $BUILD/sqltest
# against the extension $EXT (each file on a fresh connection, in its own
# process). The runner prints PASS/FAIL per check, and runs a file marked
# "-- sqltest: encodings ..." once per text encoding.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
runner=$BUILD/sqltest
rc=0

if [ ! -x "$runner" ]; then
  echo "FAIL sql:runner: $runner is missing (make test-programs)"
  exit 1
fi
if [ ! -f "$EXT" ]; then
  echo "FAIL sql:extension: $EXT is missing (make)"
  exit 1
fi
# One runner process per file, so that a crash (or a sanitizer report)
# is pinned to its file and does not hide the files after it.
for f in tests/sql/[0-9]*.sql; do
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(${TEST_WRAP:-} "$runner" --ext "$EXT" "$f" 2>&1)
  status=$?
  printf '%s\n' "$out"
  if [ "$status" -eq 99 ]; then
    echo "FAIL $(basename "$f"): memory errors or leaks reported under TEST_WRAP (status 99)"
    rc=1
  elif grep -q '^FAIL ' <<<"$out"; then
    rc=1
  elif [ "$status" -ne 0 ]; then
    echo "FAIL $(basename "$f"): the runner exited with status $status without reporting a failed check"
    rc=1
  fi
done
exit $rc
