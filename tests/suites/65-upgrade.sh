#!/usr/bin/env bash
# Ledger files of formats 1, 2, 3 and 4 (tests/fixtures/formatN.db, made by those
# builds with tests/fixtures/formatN.sql) upgraded by this build with
# SELECT idem_upgrade(...): tests/sql/upgrade-formatN.sql (and each
# upgrade-formatN-<case>.sql) on a fresh copy, on the system SQLite and, when
# built, on the newer one.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
if [ ! -x "$BUILD/sqltest" ] || [ ! -f "$EXT" ]; then
  echo "FAIL upgrade:setup: $BUILD/sqltest or $EXT is missing (make test-programs)"
  exit 1
fi
# shellcheck source=tests/lib/newer.sh
. tests/lib/newer.sh
# shellcheck source=tests/lib/runner.sh
. tests/lib/runner.sh
# The runner starts in a directory of this run's own, where each file's
# ATTACH 'build/upgrade/<fixture>.db' finds the copy made for it: another
# run at the same time (the plain and the sanitizer build) has its own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/upgrade"
fail=0
# run LABEL RUNNER EXT: each file tests/sql/upgrade-<fixture>[-case].sql on
# a fresh copy of its fixture
run() {
  local out f t n status runner ext root=$PWD
  runner=$(runner_path "$2")
  ext=$(runner_path "$3")
  for f in format1 format2 format3 format4; do
    for t in tests/sql/upgrade-"$f".sql tests/sql/upgrade-"$f"-*.sql; do
      [ -f "$t" ] || continue
      n=$(basename "$t" .sql)
      n=${n#upgrade-}
      rm -f "$tmp/build/upgrade/$f.db-journal" "$tmp/build/upgrade/$f.db-wal"
      cp "tests/fixtures/$f.db" "$tmp/build/upgrade/$f.db" || { echo "FAIL upgrade:$1:$n:copy"; fail=1; continue; }
      # shellcheck disable=SC2086  # TEST_WRAP is a command line
      out=$(cd "$tmp" && ${TEST_WRAP:-} "$runner" --ext "$ext" "$root/$t" 2>&1)
      status=$?
      printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\) upgrade-$n\.sql:/\1 upgrade:$1:$n:/"
      runner_failed "upgrade:$1:$n" "$t" "$status" "$out" && fail=1
    done
  done
}
run "$("$BUILD/sqltest" --eval 'SELECT sqlite_version()' 2>/dev/null)" "$BUILD/sqltest" "$EXT"
if newer_ready upgrade; then
  run "$(build/compat/sqltest --eval 'SELECT sqlite_version()' 2>/dev/null)" build/compat/sqltest build/compat/idempotency.so
fi
exit $fail
