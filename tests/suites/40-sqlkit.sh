#!/usr/bin/env bash
# The plain-SQL kit in sql/, run through the sqlite3 shell with -bail, as
# docs/operating.md tells users, against fixture databases made by tests/fixtures/legacy*.sql:
#
#   sql/operations.sql      the strict table refuses every malformed key with
#                           SQLite's exact message (UTF-8, UTF-16le, UTF-16be)
#   sql/audit.sql           lists the bad rows of a legacy table with reasons
#   sql/migrate.sql         legacy -> strict in one transaction; every row in
#                           exactly one place, unchanged; a failed step (or
#                           failed count check) leaves the database as it was;
#                           the VACUUM INTO rehearsal
#   sql/install-ledger.sql  ledger + guard (needs the extension)
#
# Only install-ledger needs the extension. The sqlite3 shell cannot load a
# sanitizer build, so when $EXT is one (make sanitize) that part loads the
# plain build ${EXT_PLAIN:-build/idempotency.so}, or skips, saying why.
set -u
cd "$(dirname "$0")/../.." || exit 1
FIX=tests/fixtures EXPECT=tests/sql/sqlkit
# shellcheck source=tests/lib/sqlkit.sh
. tests/lib/sqlkit.sh

if ! command -v "$SQLITE3" >/dev/null 2>&1; then
  echo "SKIP sqlkit: the sqlite3 shell is not installed (Debian: apt-get install sqlite3)"
  exit 0
fi

TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT

# ---------------------------------------------------------------------------
# 0. The two shared blocks cannot drift.
# ---------------------------------------------------------------------------
block_strict() { sed -n '/^CREATE TABLE operations (/,/^);/p' "$1"; }
block_audit() { sed -n '/^-- ==== audit view/,/^-- ==== end audit view/p' "$1"; }
a=$(block_strict sql/operations.sql)
b=$(block_strict sql/migrate.sql)
if [ -z "$a" ]; then
  fail sqlkit:strict-table-text "no CREATE TABLE operations block in sql/operations.sql"
else
  check sqlkit:strict-table-text "sql/migrate.sql's CREATE TABLE operations differs from sql/operations.sql's" \
    [ "$a" = "$b" ]
fi
a=$(block_audit sql/audit.sql)
b=$(block_audit sql/migrate.sql)
if [ -z "$a" ]; then
  fail sqlkit:audit-view-text "no '-- ==== audit view' block in sql/audit.sql"
else
  check sqlkit:audit-view-text "sql/migrate.sql's audit view block differs from sql/audit.sql's" \
    [ "$a" = "$b" ]
fi

# ---------------------------------------------------------------------------
# 1. sql/operations.sql: the strict table, in each encoding.
# ---------------------------------------------------------------------------
NN_T='NOT NULL constraint failed: operations.tenant'
NN_O='NOT NULL constraint failed: operations.operation_id'
CK_T='CHECK constraint failed: tenant_key_grammar'
CK_O='CHECK constraint failed: operation_id_key_grammar'
UQ='UNIQUE constraint failed: operations.tenant, operations.operation_id'

# name|SQL expression of a refused key value
BAD_VALUES=(
  "null|NULL"
  "empty|''"
  "space|' '"
  "tab|char(9)"
  "nbsp|char(160)"
  "e-acute|'caf' || char(233)"
  "ideographic-space|'op' || char(12288) || '1'"
  "surrounding-space|' op-1 '"
  "embedded-nul|'a' || char(0) || 'b'"
  "leading-nul|char(0) || 'a'"
  "len-129|printf('%.129c', 'x')"
  "integer|5"
  "real|1.5"
  "blob|x'6162'"
)

for enc in UTF-8 UTF-16le UTF-16be; do
  db=$TMPD/strict-$enc.db
  p="sqlkit:operations:$enc"
  if ! { echo "PRAGMA encoding = '$enc';"; cat sql/operations.sql; } |
       "$SQLITE3" -bail "$db" >/dev/null 2>"$TMPD/err"; then
    fail "$p:create" "$(clean_error <"$TMPD/err")"
    continue
  fi
  expect_eq "$p:create" "$(sq "$db" "SELECT encoding FROM pragma_encoding")" "$enc"
  expect_eq "$p:key-columns-untyped" \
    "$(sq "$db" "SELECT group_concat(name || ':' || type || ':' || \"notnull\", ' ')
                   FROM pragma_table_info('operations')")" \
    "tenant::1 operation_id::1 payload:TEXT:1"
  sq "$db" "INSERT INTO operations VALUES ('tenant-a', 'op-1', 'first')"

  for entry in "${BAD_VALUES[@]}"; do
    name=${entry%%|*}
    val=${entry#*|}
    if [ "$name" = null ]; then wt=$NN_T wo=$NN_O; else wt=$CK_T wo=$CK_O; fi
    expect_sql_error "$p:refuse-tenant-$name" "$wt" "$db" \
      "INSERT INTO operations VALUES ($val, 'op-2', 'p');"
    expect_sql_error "$p:refuse-operation_id-$name" "$wo" "$db" \
      "INSERT INTO operations VALUES ('tenant-a', $val, 'p');"
  done
  expect_sql_error "$p:refuse-payload-null" 'NOT NULL constraint failed: operations.payload' "$db" \
    "INSERT INTO operations VALUES ('tenant-a', 'op-2', NULL);"
  expect_sql_error "$p:refuse-duplicate" "$UQ" "$db" \
    "INSERT INTO operations VALUES ('tenant-a', 'op-1', 'a retry with another payload');"
  # OR IGNORE turns the refusal into "no error, no row": not an admission
  expect_eq "$p:or-ignore-inserts-nothing" \
    "$(sq "$db" "INSERT OR IGNORE INTO operations VALUES (NULL, 'op-2', 'p');
                 INSERT OR IGNORE INTO operations VALUES ('tenant-a', 'op-1', 'p');
                 SELECT total_changes();" 2>&1)" 0
  expect_sql_error "$p:refuse-update-to-null" "$NN_O" "$db" \
    "UPDATE operations SET operation_id = NULL;"
  expect_sql_error "$p:refuse-update-to-integer" "$CK_T" "$db" \
    "UPDATE operations SET tenant = 7;"
  # the refusals above changed nothing
  expect_eq "$p:refusals-wrote-nothing" \
    "$(sq "$db" "SELECT count(*), group_concat(tenant || '/' || operation_id || '/' || payload) FROM operations")" \
    "1|tenant-a/op-1/first"

  if sq "$db" "INSERT INTO operations VALUES ('tenant-b', 'op-1', 'same id, another tenant');
               INSERT INTO operations VALUES (printf('%.128c', 'T'), printf('%.128c', 'o'), '128 characters');
               INSERT INTO operations VALUES ('Tenant_42-b', CAST(5 AS TEXT), 'the text 5');
               INSERT INTO operations VALUES ('_', '-', 'one character each');" 2>"$TMPD/err"; then
    expect_eq "$p:accept" \
      "$(sq "$db" "SELECT count(*), sum(typeof(tenant) = 'text' AND typeof(operation_id) = 'text'),
                          max(length(tenant)), max(length(operation_id)),
                          (SELECT count(*) FROM operations WHERE operation_id = 'op-1')
                     FROM operations")" \
      "5|5|128|128|2"
  else
    fail "$p:accept" "$(clean_error <"$TMPD/err")"
  fi
  expect_sql_error "$p:refuse-when-table-exists" 'table operations already exists' "$db" \
    "$(cat sql/operations.sql)"
done

# ---------------------------------------------------------------------------
# 2. sql/audit.sql on the legacy fixtures.
# ---------------------------------------------------------------------------
# make_legacy DB FIXTURE [ENCODING]
make_legacy() {
  { [ -n "${3:-}" ] && echo "PRAGMA encoding = '$3';"; cat "$2"; } |
    "$SQLITE3" -bail "$1" >/dev/null
}

for enc in UTF-8 UTF-16le UTF-16be; do
  db=$TMPD/legacy-$enc.db
  p="sqlkit:audit:$enc"
  if ! make_legacy "$db" "$FIX/legacy.sql" "$enc" 2>"$TMPD/err"; then
    fail "$p:fixture" "$(clean_error <"$TMPD/err")"
    continue
  fi
  before=$(state "$db")
  if got=$("$SQLITE3" -bail -readonly "$db" <sql/audit.sql 2>"$TMPD/err"); then
    if [ "$got" = "$(cat "$EXPECT-legacy-audit.expected")" ]; then
      pass "$p:report"
    else
      fail "$p:report" "differs from $EXPECT-legacy-audit.expected: $(diff <(echo "$got") "$EXPECT-legacy-audit.expected" | head -n 6 | tr '\n' ' ')"
    fi
  else
    fail "$p:report" "$(clean_error <"$TMPD/err")"
  fi
  expect_eq "$p:writes-nothing" "$(state "$db")" "$before"
done

db=$TMPD/typeless.db
if make_legacy "$db" "$FIX/legacy-typeless.sql" 2>"$TMPD/err"; then
  expect_eq sqlkit:audit:typeless-report "$(sq "$db" <sql/audit.sql 2>&1)" \
    "$(cat "$EXPECT-legacy-typeless-audit.expected")"
else
  fail sqlkit:audit:typeless-report "$(clean_error <"$TMPD/err")"
fi
# a table that already follows the grammar: nothing to report
db=$TMPD/clean.db
sq "$db" <sql/operations.sql
sq "$db" "INSERT INTO operations VALUES ('tenant-a', 'op-1', 'p'), ('tenant-b', 'op-1', 'p')"
expect_eq sqlkit:audit:clean-table-reports-nothing "$(sq "$db" <sql/audit.sql 2>&1)" ""

# ---------------------------------------------------------------------------
# 3. sql/migrate.sql
# ---------------------------------------------------------------------------
# The strict schema made by sql/operations.sql, for comparison.
strict_schema() {
  sq "$1" "SELECT type || '|' || name || '|' || sql FROM sqlite_schema
            WHERE tbl_name = 'operations' ORDER BY type, name"
}
ref_schema=$(strict_schema "$TMPD/clean.db")

# migrated_ok PREFIX LEGACY_SNAPSHOT_DB MIGRATED_DB AUDIT_EXPECTED: the
# checks every successful migration must pass, made by the test itself
# (not trusting the script's own verification).
migrated_ok() {
  local p=$1 orig=$2 db=$3 expected=$4
  expect_eq "$p:schema-identical-to-operations.sql" "$(strict_schema "$db")" "$ref_schema"
  expect_eq "$p:legacy-kept-identical" "$(fingerprint "$db" operations_legacy)" \
    "$(fingerprint "$orig" operations)"
  expect_eq "$p:legacy-schema-kept" \
    "$(sq "$db" "SELECT group_concat(name || ':' || type, ' ') FROM pragma_table_info('operations_legacy')")" \
    "$(sq "$orig" "SELECT group_concat(name || ':' || type, ' ') FROM pragma_table_info('operations')")"
  # every legacy row, unchanged (type and bytes), in exactly one table
  expect_eq "$p:every-row-once-unchanged" \
    "$( (fingerprint "$db" operations; fingerprint "$db" operations_quarantine legacy_rowid) | sort -t'|' -k1,1n)" \
    "$(fingerprint "$orig" operations)"
  expect_eq "$p:counts" \
    "$(sq "$db" "SELECT (SELECT count(*) FROM operations_legacy) =
                        (SELECT count(*) FROM operations) + (SELECT count(*) FROM operations_quarantine)")" 1
  # the quarantine holds exactly the rows the audit lists, with its reasons
  expect_eq "$p:quarantine-is-the-audit" \
    "$(sq "$db" "SELECT legacy_rowid || '|' || reason FROM operations_quarantine ORDER BY legacy_rowid")" \
    "$(awk -F'|' '$1 == prev { line = line "; " $2 ": " $3; next }
                  { if (NR > 1) print line; line = $1 "|" $2 ": " $3; prev = $1 }
                  END { if (NR) print line }' "$expected")"
  expect_eq "$p:quarantine-columns-untyped" \
    "$(sq "$db" "SELECT group_concat(name || ':' || type, ' ') FROM pragma_table_info('operations_quarantine')")" \
    "legacy_rowid:INTEGER tenant: operation_id: payload: reason:TEXT"
  expect_eq "$p:no-temp-leftovers" "$(sq "$db" "SELECT count(*) FROM sqlite_temp_schema")" 0
  # the guide's regression: NULL straight into each key column must fail
  expect_sql_error "$p:regression-null-tenant" "$NN_T" "$db" \
    "INSERT INTO operations VALUES (NULL, 'op-new', 'p');"
  expect_sql_error "$p:regression-null-operation_id" "$NN_O" "$db" \
    "INSERT INTO operations VALUES ('tenant-a', NULL, 'p');"
}

for enc in UTF-8 UTF-16le UTF-16be; do
  orig=$TMPD/legacy-$enc.db
  db=$TMPD/migrated-$enc.db
  p="sqlkit:migrate:$enc"
  cp "$orig" "$db"
  if out=$("$SQLITE3" -bail "$db" <sql/migrate.sql 2>"$TMPD/err"); then
    expect_eq "$p:run" "$out" "legacy_rows=26 migrated_rows=7 quarantined_rows=19"
    migrated_ok "$p" "$orig" "$db" "$EXPECT-legacy-audit.expected"
  else
    fail "$p:run" "$(clean_error <"$TMPD/err")"
  fi
done

# the typeless shape: repeated complete keys and non-text values
orig=$TMPD/typeless.db
db=$TMPD/typeless-migrated.db
cp "$orig" "$db"
if out=$("$SQLITE3" -bail "$db" <sql/migrate.sql 2>"$TMPD/err"); then
  expect_eq sqlkit:migrate:typeless:run "$out" "legacy_rows=9 migrated_rows=2 quarantined_rows=7"
  migrated_ok sqlkit:migrate:typeless "$orig" "$db" "$EXPECT-legacy-typeless-audit.expected"
  expect_eq sqlkit:migrate:typeless:types-kept \
    "$(sq "$db" "SELECT group_concat(legacy_rowid || ':' || typeof(tenant) || ',' || typeof(operation_id) || ',' || typeof(payload), ' ')
                   FROM operations_quarantine WHERE legacy_rowid IN (4, 5, 6, 7, 8)")" \
    "4:text,integer,text 5:text,real,text 6:text,text,null 7:text,text,integer 8:integer,text,text"
else
  fail sqlkit:migrate:typeless:run "$(clean_error <"$TMPD/err")"
fi

# A second run refuses at the rename and changes nothing.
db=$TMPD/migrated-UTF-8.db
before=$(state "$db")
expect_error sqlkit:migrate:second-run-refused \
  'there is already another table or index with this name: operations_legacy' "$db" <sql/migrate.sql
expect_eq sqlkit:migrate:second-run-changes-nothing "$(state "$db")" "$before"

# A failing step: each case must leave the database exactly as it was
# (legacy table under its original name, same rows, no partial tables).
orig=$TMPD/legacy-UTF-8.db
orig_state=$(state "$orig")
# fail_case NAME WANT-ERROR SETUP-SQL SCRIPT [shell options]
fail_case() {
  local name=$1 want=$2 setup=$3 script=$4
  shift 4
  local db=$TMPD/fail-$name.db
  cp "$orig" "$db"
  [ -n "$setup" ] && sq "$db" "$setup"
  local before
  before=$(state "$db")
  expect_error "sqlkit:migrate:fail-$name" "$want" "$db" "$@" <"$script"
  expect_eq "sqlkit:migrate:fail-$name-nothing-lost" "$(state "$db")" "$before"
  expect_eq "sqlkit:migrate:fail-$name-legacy-intact" "$(fingerprint "$db" operations)" \
    "$(fingerprint "$orig" operations)"
}
# step 4 fails: a table named operations_quarantine already exists
fail_case quarantine-exists 'table operations_quarantine already exists' \
  "CREATE TABLE operations_quarantine(x)" sql/migrate.sql
# step 3 fails: operations_legacy exists (an earlier attempt, or a name clash)
fail_case legacy-exists 'there is already another table or index with this name: operations_legacy' \
  "CREATE TABLE operations_legacy(x)" sql/migrate.sql
# step 5 fails half-way, after rows were copied: a modified copy of the
# script whose copy also inserts a row the strict table refuses
sed 's/^   ORDER BY rowid;$/   ORDER BY rowid;\nINSERT INTO operations VALUES (NULL, NULL, NULL);/' \
  sql/migrate.sql >"$TMPD/migrate-copy-fails.sql"
if cmp -s sql/migrate.sql "$TMPD/migrate-copy-fails.sql"; then
  fail sqlkit:migrate:fail-copy "could not inject the failing insert (no '   ORDER BY rowid;' line)"
else
  fail_case copy "$NN_T" "" "$TMPD/migrate-copy-fails.sql"
fi
# step 6 catches a lost row: a modified copy drops one quarantined row
# before the verification, so the counts no longer add up
sed '/^-- ==== 6. verify/i DELETE FROM operations_quarantine WHERE legacy_rowid = 3;' \
  sql/migrate.sql >"$TMPD/migrate-loses-row.sql"
fail_case lost-row 'CHECK constraint failed: counts_add_up' "" "$TMPD/migrate-loses-row.sql"
# step 6 catches a changed row
sed '/^-- ==== 6. verify/i UPDATE operations SET payload = payload || '"'!'"' WHERE rowid = 1;' \
  sql/migrate.sql >"$TMPD/migrate-changes-row.sql"
fail_case changed-row 'CHECK constraint failed: rows_unchanged' "" "$TMPD/migrate-changes-row.sql"
# even without -bail, a failed verification rolls back (INSERT OR ROLLBACK)
db=$TMPD/fail-no-bail.db
cp "$orig" "$db"
"$SQLITE3" "$db" <"$TMPD/migrate-loses-row.sql" >/dev/null 2>&1
expect_eq sqlkit:migrate:fail-without-bail-commits-nothing "$(state "$db")" "$orig_state"

# ---------------------------------------------------------------------------
# 4. Rehearsal on a copy: VACUUM INTO, then migrate the copy.
# ---------------------------------------------------------------------------
prod=$TMPD/prod.db
cp "$orig" "$prod"
rm -f "$TMPD/rehearsal.db"
before=$(state "$prod")
(
  cd "$TMPD" && "$SQLITE3" -bail prod.db "VACUUM INTO 'rehearsal.db'"
) 2>"$TMPD/err"
if [ -f "$TMPD/rehearsal.db" ]; then
  reh=$TMPD/rehearsal.db
  expect_eq sqlkit:rehearsal:copy-identical "$(state "$reh")" "$before"
  if out=$("$SQLITE3" -bail "$reh" <sql/migrate.sql 2>"$TMPD/err"); then
    expect_eq sqlkit:rehearsal:migrate-copy "$out" "legacy_rows=26 migrated_rows=7 quarantined_rows=19"
  else
    fail sqlkit:rehearsal:migrate-copy "$(clean_error <"$TMPD/err")"
  fi
  expect_eq sqlkit:rehearsal:original-untouched "$(state "$prod")" "$before"
else
  fail sqlkit:rehearsal:copy "VACUUM INTO failed: $(clean_error <"$TMPD/err")"
fi

# ---------------------------------------------------------------------------
# 5. sql/install-ledger.sql (needs the extension).
# ---------------------------------------------------------------------------
EXT=${EXT:-build/idempotency.so}
plain=$EXT
case "$EXT" in
  *asan*) plain=${EXT_PLAIN:-build/idempotency} ;;
esac
# accept the path with or without its .so/.dylib suffix, as .load does
for f in "$plain" "$plain.so" "$plain.dylib"; do
  if [ -f "$f" ]; then plain=$f; break; fi
done
ext_ok=1
if [ "$plain" != "$EXT" ] && [ ! -f "$plain" ]; then
  echo "SKIP sqlkit:install: the sqlite3 shell cannot load the sanitizer build $EXT, and the plain build $plain is absent (run make)"
  ext_ok=0
elif [ ! -f "$plain" ]; then
  fail sqlkit:install "the extension $plain is not built (run make)"
  ext_ok=0
fi
if [ "$ext_ok" = 1 ]; then
  LOAD=(-cmd ".load $plain")
  db=$TMPD/guarded.db
  cp "$TMPD/migrated-UTF-8.db" "$db"
  # without .load the install fails at once and creates nothing
  before=$(state "$db")
  expect_error sqlkit:install:needs-load 'no such module: idempotency' "$db" <sql/install-ledger.sql
  expect_eq sqlkit:install:needs-load-nothing-created "$(state "$db")" "$before"
  if out=$("$SQLITE3" -bail "${LOAD[@]}" "$db" <sql/install-ledger.sql 2>"$TMPD/err"); then
    expect_eq sqlkit:install:run "$out" 1
    expect_eq sqlkit:install:guard-triggers \
      "$(sq "$db" "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema
                     WHERE type = 'trigger' AND tbl_name = 'operations' ORDER BY name)")" \
      "operations_idem_ledger_insert operations_idem_ledger_member operations_idem_ledger_update"
  else
    fail sqlkit:install:run "$(clean_error <"$TMPD/err")"
  fi
  n_before=$(sq "$db" "SELECT count(*) FROM operations")
  expect_error sqlkit:install:insert-without-claim-refused \
    'idem_guard: insert into "operations" refused: key "op-9" needs a live claim of ledger ledger; there is no claim for it' \
    "$db" "${LOAD[@]}" <<<"INSERT INTO operations VALUES ('tenant-a', 'op-9', 'no claim');"
  expect_error sqlkit:install:insert-null-key-refused \
    'idem_guard: insert into "operations" needs a key; got NULL' \
    "$db" "${LOAD[@]}" <<<"INSERT INTO operations VALUES ('tenant-a', NULL, 'no key');"
  expect_error sqlkit:install:fails-closed-without-extension \
    'no such function: idem_guard_check' \
    "$db" <<<"INSERT INTO operations VALUES ('tenant-a', 'op-9', 'no extension');"
  expect_eq sqlkit:install:refusals-wrote-nothing "$(sq "$db" "SELECT count(*) FROM operations")" "$n_before"
  # claim before act, in one transaction: claim, write, settle
  if out=$("$SQLITE3" -bail "${LOAD[@]}" "$db" 2>"$TMPD/err" <<'EOF'
BEGIN IMMEDIATE;
SELECT json_extract(idem_claim('ledger', 'tenant-a', 'conv-1', 'tool', '{}', 'local', 'op-9'), '$.decision');
INSERT INTO operations(tenant, operation_id, payload) VALUES ('tenant-a', 'op-9', 'written under the claim');
SELECT json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE tenant = 'tenant-a' AND key = 'op-9'),
                                'succeeded', '{"rows":1}'), '$.status');
COMMIT;
EOF
  ); then
    expect_eq sqlkit:install:insert-with-live-claim-accepted "$out" "admitted
succeeded"
    expect_eq sqlkit:install:row-written "$(sq "$db" "SELECT count(*) FROM operations WHERE tenant = 'tenant-a' AND operation_id = 'op-9'")" 1
  else
    fail sqlkit:install:insert-with-live-claim-accepted "$(clean_error <"$TMPD/err")"
  fi
  # the retry replays with the row as its member, and cannot write again
  rid=$(sq "$db" "SELECT rowid FROM operations WHERE operation_id = 'op-9'")
  # (idem_claim runs in a statement of its own; its JSON is read afterwards)
  j=$(sq "$db" "${LOAD[@]}" "SELECT idem_claim('ledger', 'tenant-a', 'conv-1', 'tool', '{}', 'local', 'op-9')" 2>&1)
  expect_eq sqlkit:install:retry-replays \
    "$(sq ":memory:" "SELECT json_extract('${j//\'/\'\'}', '$.decision') || ' ' || json_extract('${j//\'/\'\'}', '$.members')" 2>&1)" \
    "replay [{\"table\":\"operations\",\"rowid\":$rid}]"
  expect_error sqlkit:install:retry-cannot-write-again \
    'idem_guard: insert into "operations" refused: key "op-9" needs a live claim of ledger ledger; it is succeeded' \
    "$db" "${LOAD[@]}" <<<"INSERT INTO operations VALUES ('tenant-a', 'op-9', 'second write');"
  before=$(state "$db")
  expect_error sqlkit:install:second-run-refused 'table ledger already exists' \
    "$db" "${LOAD[@]}" <sql/install-ledger.sql
  expect_eq sqlkit:install:second-run-changes-nothing "$(state "$db")" "$before"
fi
exit 0
