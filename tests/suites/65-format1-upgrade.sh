#!/usr/bin/env bash
# A format-1 ledger file (tests/fixtures/format1.db, made by the format-1
# build with tests/fixtures/format1.sql) upgraded by this build with
# SELECT idem_upgrade(...): tests/upgrade/format1.sql on a fresh copy, on the
# system SQLite and, when built, on the newer one.
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
mkdir -p build/upgrade
fail=0
# run LABEL RUNNER EXT
run() {
  local out
  cp tests/fixtures/format1.db build/upgrade/format1.db || { echo "FAIL upgrade:$1:copy"; fail=1; return; }
  rm -f build/upgrade/format1.db-journal build/upgrade/format1.db-wal
  out=$("$2" --ext "$3" tests/upgrade/format1.sql 2>&1)
  printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\) format1\.sql:/\1 upgrade:$1:/"
  grep -q '^FAIL' <<<"$out" && fail=1
}
run "$("$BUILD/sqltest" --eval 'SELECT sqlite_version()' 2>/dev/null)" "$BUILD/sqltest" "$EXT"
if newer_ready upgrade; then
  run "$(build/compat/sqltest --eval 'SELECT sqlite_version()' 2>/dev/null)" build/compat/sqltest build/compat/idempotency.so
fi
exit $fail
