#!/usr/bin/env bash
# Defensive mode (SQLITE_DBCONFIG_DEFENSIVE) on a created and a reopened
# ledger file, with the extension loaded before and after the connection
# first read the schema, on the system SQLite and on the newer one: what
# docs/ledger.md's "Defensive mode, by version" table says, exactly.
#
#   SQLite < 3.44, module registered before the schema was read (the file
#   created, or reopened with the extension loaded first): <name>_rows,
#   _meta and _guards are read-only to plain SQL ("table X may not be
#   modified"); everywhere else their triggers refuse the same writes.
#   <name>_members is never a shadow table: its triggers refuse them.
#
# Each case file is written here with the messages its version and mode
# expect, and run by the runner (tests/c/sqltest.c) with --ext, or with
# --ext-late and sqltest_load_again() after a read of the schema.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
dir=$BUILD/defensive
if [ ! -x "$BUILD/sqltest" ] || [ ! -f "$EXT" ]; then
  echo "FAIL defensive-files:setup: $BUILD/sqltest or $EXT is missing (make test-programs)"
  exit 1
fi
# shellcheck source=tests/lib/newer.sh
. tests/lib/newer.sh
# shellcheck source=tests/lib/runner.sh
. tests/lib/runner.sh
mkdir -p "$dir"
fail=0

MSG_META='idempotency: the format, identity and options of a ledger are fixed when it is created'
MSG_GUARDS='idempotency: the guards of ledger L are written only by the extension (idem_guard and idem_unguard); plain SQL may read them'
MSG_MEMBERS='idempotency: the members of ledger L are written only by the extension (the triggers idem_guard installs); plain SQL may read them'
MSG_UPDATE='idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them'

# writes LABEL SHADOW: the plain-SQL writes of a case, each a top-level
# statement that must fail with its message (SHADOW=1: the read-only
# shadow-table refusal), then the ledger's own writes, which must work
writes() {
  local shadow=$1 key=$2 meta=$MSG_META guards=$MSG_GUARDS rows=$MSG_UPDATE
  if [ "$shadow" = 1 ]; then
    meta='table L_meta may not be modified'
    guards='table L_guards may not be modified'
    rows='table L_rows may not be modified'
  fi
  cat <<EOF
SELECT 'defensive-on', sqltest_defensive(1) = 1;
-- expect-error: $meta
UPDATE f.L_meta SET v = 0 WHERE k = 'lease_seconds';
-- expect-error: $guards
DELETE FROM f.L_guards;
-- expect-error: $MSG_MEMBERS
INSERT INTO f.L_members(claim, attempt, guard, rid) VALUES (99, 1, 1, 99);
-- expect-error: $MSG_MEMBERS
UPDATE f.L_members SET rid = 7;
-- expect-error: $rows
UPDATE f.L_rows SET status = 'released' WHERE "key" = 'loc';
SELECT 'unchanged', (SELECT v FROM f.L_meta WHERE k = 'lease_seconds') = 3600
       AND (SELECT count(*) FROM f.L_guards) = 1
       AND (SELECT count(*) FROM f.L_members WHERE claim = (SELECT id FROM f.L_rows WHERE "key" = 'loc')) = 1
       AND (SELECT status FROM f.L_rows WHERE "key" = 'loc') = 'claimed';
-- the ledger's own writes and the guard's work in defensive mode
SELECT 'own-claim', json_extract(idem_claim('f.L', 't', 'c', 'write', '{"n":"$key"}', 'local', '$key'), '\$.decision') = 'admitted';
INSERT INTO f.items(tenant, k, v) VALUES ('t', '$key', 'second');
SELECT 'own-settle', json_extract(idem_settle('f.L', (SELECT token FROM f.L WHERE "key" = '$key'), 'succeeded', NULL), '\$.members')
       = '[{"table":"items","rowid":' || (SELECT rowid FROM f.items WHERE k = '$key') || '}]';
EOF
}

# case_run LABEL RUNNER VERSION_NUMBER
case_run() {
  local label=$1 runner=$2 vnum=$3 out status shadow_ok=0
  [ "$vnum" -lt 3044000 ] && shadow_ok=1
  rm -f "$dir/ledger.db" "$dir/ledger.db-journal"
  # created: the module was registered before this connection made the file
  {
    echo "ATTACH '$dir/ledger.db' AS f;"
    echo "CREATE VIRTUAL TABLE f.L USING idempotency(lease_seconds=3600);"
    echo "CREATE TABLE f.items(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT, v TEXT);"
    echo "SELECT 'guard', idem_guard('f.L', 'items', 'k', 'tenant') = 1;"
    echo "SELECT 'claim', json_extract(idem_claim('f.L', 't', 'c', 'write', '{\"n\":1}', 'local', 'loc'), '\$.decision') = 'admitted';"
    echo "INSERT INTO f.items(tenant, k, v) VALUES ('t', 'loc', 'first');"
    writes "$shadow_ok" own-created
  } >"$dir/created.sql"
  # reopened, the extension loaded when the connection opened
  { echo "ATTACH '$dir/ledger.db' AS f;"; writes "$shadow_ok" own-before; } >"$dir/before.sql"
  # reopened, the schema read first, then the extension loaded: no shadow table is known
  {
    echo "ATTACH '$dir/ledger.db' AS f;"
    echo "SELECT 'schema-read-first', (SELECT count(*) FROM f.sqlite_schema WHERE name = 'L_rows') = 1;"
    echo "SELECT 'loaded-late', sqltest_load_again() = 1;"
    writes 0 own-after
  } >"$dir/after.sql"
  for c in created before after; do
    # shellcheck disable=SC2086  # TEST_WRAP is a command line
    if [ "$c" = after ]; then
      out=$(${TEST_WRAP:-} "$runner" --ext-late "${ext_of[$runner]}" "$dir/$c.sql" 2>&1)
    else
      out=$(${TEST_WRAP:-} "$runner" --ext "${ext_of[$runner]}" "$dir/$c.sql" 2>&1)
    fi
    status=$?
    printf '%s\n' "$out" | sed "s/^\(PASS\|FAIL\|SKIP\) $c\.sql:/\1 defensive-files:$label:$c:/"
    runner_failed "defensive-files:$label:$c" "$dir/$c.sql" "$status" "$out" && fail=1
  done
}

declare -A ext_of
ext_of[$BUILD/sqltest]=$EXT
sv=$("$BUILD/sqltest" --eval "SELECT sqlite_version()" 2>/dev/null)
vnum=$(awk -F. '{ printf "%d%03d%03d", $1, $2, $3 }' <<<"$sv")
case_run "$sv" "$BUILD/sqltest" "$vnum"
if newer_ready defensive-files; then
  ext_of[build/compat/sqltest]=build/compat/idempotency.so
  nv=$(build/compat/sqltest --eval "SELECT sqlite_version()" 2>/dev/null)
  case_run "$nv" build/compat/sqltest "$(awk -F. '{ printf "%d%03d%03d", $1, $2, $3 }' <<<"$nv")"
fi
exit $fail
