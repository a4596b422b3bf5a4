#!/usr/bin/env bash
# The rows table WITHOUT the extension: tests/sql/plain-setup.sql makes a ledger
# file with the extension loaded (the runner with --ext), then each
# tests/sql/plain-NN-*.sql changes it with plain SQLite through the runner
# $BUILD/sqltest started without --ext, once with defensive mode off and
# once on. The newer SQLite's runner (build/compat/sqltest, made by
# tests/suites/60-newer-sqlite.sh) runs the same files when it is built.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
dir=build/plain
if [ ! -x "$BUILD/sqltest" ] || [ ! -f "$EXT" ]; then
  echo "FAIL plain:setup: $BUILD/sqltest or $EXT is missing (make test-programs)"
  exit 1
fi
# shellcheck source=tests/lib/newer.sh
. tests/lib/newer.sh
mkdir -p "$dir"
fail=0
# run LABEL RUNNER DEFENSIVE FILE: a fresh ledger file, then FILE without the extension
run() {
  local label=$1 runner=$2 defensive=$3 f=$4 out
  rm -f "$dir/ledger.db" "$dir/ledger.db-journal" "$dir/case.sql" "$dir/copy.db"
  out=$("$BUILD/sqltest" --ext "$EXT" tests/sql/plain-setup.sql 2>&1)
  if [ $? -ne 0 ] || grep -q '^FAIL' <<<"$out"; then
    echo "FAIL plain:$label:setup: $(grep -m1 '^FAIL' <<<"$out")"
    fail=1
    return
  fi
  { echo "SELECT 'defensive-$defensive', sqltest_defensive($defensive) = $defensive;"; cat "$f"; } >"$dir/case.sql"
  out=$("$runner" "$dir/case.sql" 2>&1)
  printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\) case\.sql:/\1 plain:$label:${f##*/plain-}:/"
  grep -q '^FAIL' <<<"$out" && fail=1
}
v=$("$BUILD/sqltest" --eval "SELECT sqlite_version()" 2>/dev/null)
newer=
if newer_ready plain; then
  newer=$(build/compat/sqltest --eval "SELECT sqlite_version()" 2>/dev/null)
  newer=${newer:-newer}
fi
for f in tests/sql/plain-[0-9]*.sql; do
  run "${v:-system}" "$BUILD/sqltest" 0 "$f"
  run "${v:-system}:defensive" "$BUILD/sqltest" 1 "$f"
  if [ -n "$newer" ]; then
    run "$newer" build/compat/sqltest 0 "$f"
    run "$newer:defensive" build/compat/sqltest 1 "$f"
  fi
done
# .dump of the shell without the extension: the whole file, triggers too,
# and the dump loads into a fresh file (plain SQL can copy a ledger)
if command -v sqlite3 >/dev/null 2>&1; then
  rm -f "$dir/ledger.db" "$dir/ledger.db-journal" "$dir/dump.db"
  "$BUILD/sqltest" --ext "$EXT" tests/sql/plain-setup.sql >/dev/null 2>&1
  dump=$(sqlite3 "$dir/ledger.db" .dump 2>&1)
  if grep -q '^CREATE TRIGGER "L_rows_update" BEFORE UPDATE ON "L_rows" WHEN NOT idem_own_write()' <<<"$dump" &&
    grep -q "^INSERT INTO L_rows VALUES" <<<"$dump" && sqlite3 "$dir/dump.db" <<<"$dump" 2>/dev/null &&
    [ "$(sqlite3 "$dir/dump.db" 'SELECT count(*) FROM L_rows')" = 6 ]; then
    echo "PASS plain:dump"
  else
    echo "FAIL plain:dump: sqlite3 .dump of the ledger file did not give back its triggers and rows"
    fail=1
  fi
else
  echo "SKIP plain:dump: no sqlite3 shell on PATH"
fi
exit $fail
