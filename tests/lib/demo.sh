#!/usr/bin/env bash
# make demo: the seed's counterexample, its plain-SQL repair, then the
# extension's key functions, all run through the sqlite3 shell.
#
# The first four lines are computed from SQLite, not echoed:
#   nullable_key_rows=2         a UNIQUE(tenant, operation_id) table takes two
#                               rows whose operation_id is NULL (NULLs are distinct)
#   fixed_missing_key=rejected  NOT NULL + the key grammar CHECK refuse the NULL
#   fixed_duplicate_key=rejected  UNIQUE refuses the repeated complete key
#   fixed_rows=1
# The script exits non-zero if SQLite does not behave as described.
set -euo pipefail
cd "$(dirname "$0")/../.."

EXT=${EXT:-build/idempotency.so}
SQLITE3=${SQLITE3:-sqlite3}
command -v "$SQLITE3" >/dev/null 2>&1 || {
  echo "demo: the sqlite3 shell is not installed (Debian: apt-get install sqlite3)" >&2
  exit 1
}
[ -f "$EXT" ] || { echo "demo: $EXT is not built; run make" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/demo.db
status=0

# Run SQL statements (one per argument) against $db, stopping at the first error.
sql() { "$SQLITE3" -bail "$db" "$@"; }

# The error text of a failed sqlite3 run, without the shell's own prefix and
# the trailing "(code)": "Error: stepping, X (19)" -> "X".
clean_error() {
  sed -E -e 's/^(Error|Runtime error|Parse error): *//' -e 's/^(stepping|in prepare), //' \
    -e 's/ \([0-9]+\)$//' | head -n 1
}

# try_insert NAME SQL: run SQL; print "rejected" if SQLite refused it with a
# constraint error (keeping the message in $tmp/NAME.err), else "accepted".
try_insert() {
  if "$SQLITE3" -bail "$db" "$2" >/dev/null 2>"$tmp/$1.err"; then
    echo accepted
  elif grep -q 'constraint failed' "$tmp/$1.err"; then
    echo rejected
  else
    echo "demo: unexpected error from: $2" >&2
    cat "$tmp/$1.err" >&2
    echo error
  fi
}

# ---------------------------------------------------------------------------
# 1. The seed's counterexample and its repair, in plain SQL (no extension).
# ---------------------------------------------------------------------------

# The seed's ledger: the key columns are nullable, so UNIQUE does not hold.
sql "CREATE TABLE operations_nullable (
       tenant TEXT,
       operation_id TEXT,
       payload TEXT NOT NULL,
       UNIQUE (tenant, operation_id)
     )" \
  "INSERT INTO operations_nullable VALUES ('tenant-a', NULL, 'same-request')" \
  "INSERT INTO operations_nullable VALUES ('tenant-a', NULL, 'same-request')"
nullable_rows=$(sql "SELECT count(*) FROM operations_nullable")

# The repair: NOT NULL plus the key grammar of docs/keys.md as a CHECK.
# The key columns have no declared type, so an INTEGER is not turned into
# TEXT before the CHECK sees it.
key_rule() {
  printf "typeof(%s) = 'text' AND length(%s) BETWEEN 1 AND 128 AND instr(%s, char(0)) = 0 AND %s NOT GLOB '*[^A-Za-z0-9_-]*'" \
    "$1" "$1" "$1" "$1"
}
sql "CREATE TABLE operations (
       tenant NOT NULL CHECK ($(key_rule tenant)),
       operation_id NOT NULL CHECK ($(key_rule operation_id)),
       payload TEXT NOT NULL,
       UNIQUE (tenant, operation_id)
     )" \
  "INSERT INTO operations VALUES ('tenant-a', 'op-1', 'same-request')"
missing=$(try_insert missing "INSERT INTO operations VALUES ('tenant-a', NULL, 'same-request')")
duplicate=$(try_insert duplicate "INSERT INTO operations VALUES ('tenant-a', 'op-1', 'same-request')")
fixed_rows=$(sql "SELECT count(*) FROM operations")

echo "nullable_key_rows=$nullable_rows"
echo "fixed_missing_key=$missing"
echo "fixed_duplicate_key=$duplicate"
echo "fixed_rows=$fixed_rows"

if [ "$nullable_rows" != 2 ] || [ "$missing" != rejected ] || [ "$duplicate" != rejected ] ||
  [ "$fixed_rows" != 1 ]; then
  echo "demo: SQLite did not behave as the seed describes" >&2
  status=1
fi

cat <<EOF

What happened:
  The seed's table declares UNIQUE (tenant, operation_id) but lets the key be
  NULL. SQLite treats every NULL as distinct, so the same incomplete request
  ('tenant-a', NULL) was admitted $nullable_rows times.
  The repaired table (key columns NOT NULL, checked against the key grammar
  1-128 of A-Z a-z 0-9 _ -) refused both retries:
    missing key:   $(clean_error <"$tmp/missing.err")
    duplicate key: $(clean_error <"$tmp/duplicate.err")
EOF

# ---------------------------------------------------------------------------
# 2. The extension: key grammar, canonical arguments, derived keys.
# ---------------------------------------------------------------------------

# ext_sql SQL: run one statement with the extension loaded; print its result,
# or "error: <message>" if it failed.
ext_sql() {
  local out
  if out=$("$SQLITE3" -bail :memory: ".load $EXT" "$1" 2>&1); then
    printf '%s\n' "$out"
  else
    printf 'error: %s\n' "$(clean_error <<<"$out")"
  fi
}

# show SQL: print the statement and what it gave.
show() {
  printf '  sqlite> %s\n' "$1"
  printf '          %s\n' "$(ext_sql "$1")"
}

echo
echo "With the extension loaded (.load $EXT):"
echo
echo "idem_check_key(value, label) returns the value if it is a well-formed key"
echo "part, else fails with SQLITE_CONSTRAINT and says exactly why:"
show "SELECT idem_check_key(NULL, 'operation_id');"
show "SELECT idem_check_key('', 'operation_id');"
show "SELECT idem_check_key('   ', 'operation_id');"
show "SELECT idem_check_key('op 1', 'operation_id');"
show "SELECT idem_check_key(42, 'tenant');"
show "SELECT idem_check_key('op-1', 'operation_id');"

echo
echo "idem_key(tenant, conversation, tool, args) derives the key of a tool call"
echo "from who, which conversation, which tool and the canonical arguments."
echo "Two spellings of one call (spaces, member order, 5 vs 5.0) give one key:"
call1='{"to":"a@b.c","amount":5}'
call2='{ "amount":5.0, "to":"a@b.c" }'
show "SELECT idem_key('tenant-a', 'conv-1', 'send_email', '$call1');"
show "SELECT idem_key('tenant-a', 'conv-1', 'send_email', '$call2');"
k1=$(ext_sql "SELECT idem_key('tenant-a', 'conv-1', 'send_email', '$call1')")
k2=$(ext_sql "SELECT idem_key('tenant-a', 'conv-1', 'send_email', '$call2')")
k3=$(ext_sql "SELECT idem_key('tenant-a', 'conv-2', 'send_email', '$call1')")
if [ "$k1" = "$k2" ]; then
  echo "  -> the same key: a retry of this call is recognised as a retry."
else
  echo "  -> DIFFERENT keys: this is a bug" >&2
  status=1
fi

echo
echo "The same call in another conversation is another operation, with another key:"
show "SELECT idem_key('tenant-a', 'conv-2', 'send_email', '$call1');"
if [ "$k3" != "$k1" ] && [ "${k3#error}" = "$k3" ]; then
  echo "  -> a different key from conv-1's."
else
  echo "  -> the SAME key as conv-1's: this is a bug" >&2
  status=1
fi

echo
echo "The key hashes the canonical text (RFC 8785: no spaces, sorted members,"
echo "shortest numbers), which idem_canonical shows:"
show "SELECT idem_canonical('$call2');"
show "SELECT idem_canonical('{\"to\":\"a@b.c\",\"amount\":5,\"to\":\"x@y.z\"}');"

# Any language can recompute a key: XXH3-128 of "tenant:conversation:tool:canonical".
if command -v xxhsum >/dev/null 2>&1; then
  canon=$(ext_sql "SELECT idem_canonical('$call2')")
  digest=$(printf '%s' "tenant-a:conv-1:send_email:$canon" | xxhsum -H2 | cut -d' ' -f1)
  echo
  echo "Anyone can recompute the key without the extension (XXH3-128, as xxhsum -H2 prints):"
  echo "  \$ printf '%s' 'tenant-a:conv-1:send_email:$canon' | xxhsum -H2"
  echo "  $digest   -> idem1-$digest"
  if [ "idem1-$digest" != "$k1" ]; then
    echo "  -> differs from idem_key's result: this is a bug" >&2
    status=1
  fi
fi

# ---------------------------------------------------------------------------
# 3. The ledger: the claim is taken before the action and decides who runs.
# ---------------------------------------------------------------------------

# ledger SQL...: run statements with the extension loaded, one session.
ledger() { "$SQLITE3" -bail -cmd ".load ${EXT%.so}" "$db" "$@"; }

echo
echo "The ledger (a virtual table) arbitrates before the action runs:"
echo "  sqlite> CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300);"
ledger "CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300)" \
  "CREATE VIRTUAL TABLE quick USING idempotency(lease_seconds=0)"

claim="SELECT idem_claim('ledger', 'tenant-a', 'conv-1', 'send_email', '$call1')"
first=$(ledger "$claim")
echo "  first arrival:   $(printf '%s' "$first" | cut -c1-120)..."
d1=$(ledger "SELECT json_extract('$first', '\$.decision')")
token=$(ledger "SELECT json_extract('$first', '\$.token')")
second=$(ledger "$claim")
d2=$(ledger "SELECT json_extract('$second', '\$.decision')")
echo "  second arrival:  $second"
echo "  (the first caller acts, sending the key as its Idempotency-Key; then it settles)"
ledger "SELECT idem_settle('ledger', '$token', 'succeeded', '{\"message_id\":\"m-17\"}')" >/dev/null
third=$(ledger "$claim")
d3=$(ledger "SELECT json_extract('$third', '\$.decision') || '/' || json_extract('$third', '\$.idempotent')")
echo "  third arrival:   $third"

# An external call whose lease ran out without a settle: it may have reached
# the target, so the ledger keeps the claim and never retries it.
qclaim="SELECT idem_claim('quick', 'tenant-a', 'conv-1', 'charge_card', '{\"amount\":5}')"
ledger "$qclaim" >/dev/null
retry=$(ledger "$qclaim")
d4=$(ledger "SELECT json_extract('$retry', '\$.decision')")
echo "  timed-out charge, retried: $retry"

echo
echo "decisions: first=$d1 second=$d2 third=$d3 retry_after_timeout=$d4"
if [ "$d1" != admitted ] || [ "$d2" != in_progress ] || [ "$d3" != replay/1 ] || [ "$d4" != unknown ]; then
  echo "demo: the ledger did not decide admitted / in_progress / replay / unknown" >&2
  status=1
fi

exit "$status"
