#!/usr/bin/env bash
# Ledger files of formats 1, 2 and 3 (tests/fixtures/formatN.db, made by those
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
mkdir -p build/upgrade
fail=0
# run LABEL RUNNER EXT: each file tests/sql/upgrade-<fixture>[-case].sql on
# a fresh copy of its fixture
run() {
  local out f t n
  for f in format1 format2 format3; do
    for t in tests/sql/upgrade-"$f".sql tests/sql/upgrade-"$f"-*.sql; do
      [ -f "$t" ] || continue
      n=$(basename "$t" .sql)
      n=${n#upgrade-}
      cp "tests/fixtures/$f.db" "build/upgrade/$f.db" || { echo "FAIL upgrade:$1:$n:copy"; fail=1; continue; }
      rm -f "build/upgrade/$f.db-journal" "build/upgrade/$f.db-wal"
      out=$("$2" --ext "$3" "$t" 2>&1)
      printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\) upgrade-$n\.sql:/\1 upgrade:$1:$n:/"
      grep -q '^FAIL' <<<"$out" && fail=1
    done
  done
}
run "$("$BUILD/sqltest" --eval 'SELECT sqlite_version()' 2>/dev/null)" "$BUILD/sqltest" "$EXT"
if newer_ready upgrade; then
  run "$(build/compat/sqltest --eval 'SELECT sqlite_version()' 2>/dev/null)" build/compat/sqltest build/compat/idempotency.so
fi
exit $fail
