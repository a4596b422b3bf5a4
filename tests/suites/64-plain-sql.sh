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
if [ ! -x "$BUILD/sqltest" ] || [ ! -f "$EXT" ]; then
  echo "FAIL plain:setup: $BUILD/sqltest or $EXT is missing (make test-programs)"
  exit 1
fi
# shellcheck source=tests/lib/newer.sh
. tests/lib/newer.sh
# shellcheck source=tests/lib/runner.sh
. tests/lib/runner.sh
# The runner starts in a directory of this run's own, where the files'
# 'build/plain/...' are this run's: another run at the same time (the
# plain and the sanitizer build) has its own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$tmp/build/plain
mkdir -p "$dir"
root=$PWD
sqltest=$(runner_path "$BUILD/sqltest")
ext=$(runner_path "$EXT")
fail=0
# setup LABEL: a fresh ledger file made by tests/sql/plain-setup.sql; its
# failed checks shown; returns 1 when it failed
setup() {
  local out status
  rm -f "$dir/ledger.db" "$dir/ledger.db-journal" "$dir/case.sql" "$dir/copy.db" "$dir/dump.db"
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(cd "$tmp" && ${TEST_WRAP:-} "$sqltest" --ext "$ext" "$root/tests/sql/plain-setup.sql" 2>&1)
  status=$?
  grep '^FAIL ' <<<"$out" | sed "s/^FAIL plain-setup\.sql:/FAIL plain:$1:setup:/"
  if runner_failed "plain:$1:setup" tests/sql/plain-setup.sql "$status" "$out"; then
    fail=1
    return 1
  fi
}
# run LABEL RUNNER DEFENSIVE FILE: a fresh ledger file, then FILE without the extension
run() {
  local label=$1 runner defensive=$3 f=$4 out status
  runner=$(runner_path "$2")
  setup "$label" || return
  { echo "SELECT 'defensive-$defensive', sqltest_defensive($defensive) = $defensive;"; cat "$f"; } >"$dir/case.sql"
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(cd "$tmp" && ${TEST_WRAP:-} "$runner" "$dir/case.sql" 2>&1)
  status=$?
  printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\) case\.sql:/\1 plain:$label:${f##*/plain-}:/"
  runner_failed "plain:$label:${f##*/plain-}" "$f" "$status" "$out" && fail=1
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
  if setup dump; then
    dump=$(sqlite3 "$dir/ledger.db" .dump 2>&1)
    if grep -q '^CREATE TRIGGER "L_rows_update" BEFORE UPDATE ON "L_rows" WHEN NOT idem_own_write()' <<<"$dump" &&
      grep -q "^INSERT INTO L_rows VALUES" <<<"$dump" && sqlite3 "$dir/dump.db" <<<"$dump" 2>/dev/null &&
      [ "$(sqlite3 "$dir/dump.db" 'SELECT count(*) FROM L_rows')" = 6 ]; then
      echo "PASS plain:dump"
    else
      echo "FAIL plain:dump: sqlite3 .dump of the ledger file did not give back its triggers and rows"
      fail=1
    fi
  fi
else
  echo "SKIP plain:dump: no sqlite3 shell on PATH"
fi
exit $fail
