# shellcheck shell=bash
# tests/lib/sqlkit.sh: helpers for tests/suites/40-sqlkit.sh (sourced).
#
# Every helper runs the sqlite3 shell with -bail, as docs/operating.md tells users
# to: without it the shell carries on after an error and commits the rest.
# $SQLITE3 names the shell (default sqlite3); $TMPD is the scratch directory.

SQLITE3=${SQLITE3:-sqlite3}

pass() { echo "PASS $1"; }
# one line per check: newlines in the reason are written as \n
fail() { echo "FAIL $1: ${2//$'\n'/\\n}"; }

# check NAME WHY COMMAND...: PASS when COMMAND succeeds, else FAIL with WHY.
check() {
  local name=$1 why=$2
  shift 2
  if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}

# sq DB SQL...: run statements (each argument one) with -bail; stdout only.
sq() {
  local db=$1
  shift
  "$SQLITE3" -bail "$db" "$@"
}

# The error text of a failed shell run, without the shell's prefix and the
# trailing "(code)": "Runtime error near line 3: X (19)" -> "X".
clean_error() {
  sed -E -e 's/^(Error|Runtime error|Parse error)( near line [0-9]+)?: *//' \
    -e 's/^(stepping|in prepare), //' -e 's/ \([0-9]+\)$//' | head -n 1
}

# expect_error NAME WANT DB [shell options...] < script: the run must fail
# with exactly the message WANT.
expect_error() {
  local name=$1 want=$2 db=$3 got rc
  shift 3
  got=$("$SQLITE3" -bail "$@" "$db" 2>&1 >/dev/null)
  rc=$?
  got=$(clean_error <<<"$got")
  if [ "$rc" -eq 0 ]; then
    fail "$name" "succeeded, expected the error: $want"
  elif [ "$got" != "$want" ]; then
    fail "$name" "error was [$got], expected [$want]"
  else
    pass "$name"
  fi
}

# expect_sql_error NAME WANT DB SQL: like expect_error with one statement.
expect_sql_error() {
  local name=$1 want=$2 db=$3 sql=$4
  expect_error "$name" "$want" "$db" <<<"$sql"
}

# expect_eq NAME GOT WANT: compare two strings.
expect_eq() {
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got [$2], expected [$3]"; fi
}

# fingerprint DB TABLE [ROWID-EXPR]: one line per row, ordered by rowid:
# rowid|type:hex of tenant|type:hex of operation_id|type:hex of payload.
# hex() reads the whole value (quote() stops at an embedded NUL).
fingerprint() {
  local db=$1 tbl=$2 rid=${3:-rowid}
  sq "$db" "SELECT $rid || '|' || typeof(tenant) || ':' || hex(tenant) || '|'
               || typeof(operation_id) || ':' || hex(operation_id) || '|'
               || typeof(payload) || ':' || hex(payload)
             FROM $tbl ORDER BY $rid"
}

# schema DB: the whole schema, ordered, for "nothing changed" checks.
schema() {
  sq "$1" "SELECT type || '|' || name || '|' || tbl_name || '|' || coalesce(sql, '')
             FROM sqlite_schema ORDER BY type, name"
}

# rows DB TABLE: every row of any rowid table, ordered by rowid, each
# column as type:hex.
rows() {
  local db=$1 tbl=$2 expr
  expr=$(sq "$db" "SELECT group_concat('typeof(\"' || name || '\") || '':'' || hex(\"' || name || '\")',
                                        ' || ''|'' || ')
                     FROM pragma_table_info('$tbl')")
  sq "$db" "SELECT rowid || '|' || $expr FROM \"$tbl\" ORDER BY rowid"
}

# state DB: schema plus every row of every operations* table, so that two
# states compare equal only if nothing at all changed.
state() {
  local db=$1 t
  schema "$db"
  for t in $(sq "$db" "SELECT name FROM sqlite_schema WHERE type = 'table'
                         AND name LIKE 'operations%' ORDER BY name"); do
    echo "== $t"
    rows "$db" "$t"
  done
}
