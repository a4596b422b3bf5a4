#!/usr/bin/env bash
# The SQL suites on a newer SQLite: the amalgamation shipped in the npm
# package better-sqlite3 (version pinned in tests/js/package-lock.json,
# installed with `npm ci` in tests/js when missing; nothing of it is
# committed). `make compat` compiles it once into
# build/compat (see tests/tests.mk) with better-sqlite3's own compile
# options, builds the extension against its sqlite3ext.h and the runner
# tests/c/sqltest.c linked statically with it; every tests/sql/NN-*.sql then runs
# as in 20-sql.sh, each check prefixed "newer:". The system SQLite runs the
# same files in 20-sql.sh.
#
# Skips, saying why, when node/npm are absent or the npm fetch fails, and in
# sanitized builds (the 9 MB amalgamation is compiled once, plain, for the
# plain build only).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
DIR=tests/js
AMALG=$DIR/node_modules/better-sqlite3/deps/sqlite3
OUT=build/compat
rc=0

if [ -n "${SANITIZE:-}" ] || [ "$BUILD" != build ]; then
  echo "SKIP newer: runs in the plain build only (this is BUILD=$BUILD${SANITIZE:+, make sanitize}); the newer SQLite's amalgamation is not rebuilt with sanitizers"
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIP newer: node/npm are not installed (needed to fetch better-sqlite3's SQLite amalgamation)"
  exit 0
fi
if [ ! -f "$AMALG/sqlite3.c" ]; then
  log=$(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error 2>&1)
  if [ ! -f "$AMALG/sqlite3.c" ]; then
    echo "SKIP newer: npm ci in $DIR could not fetch better-sqlite3 ($(tail -n 1 <<<"$log"))"
    exit 0
  fi
fi
for f in sqlite3.c sqlite3.h sqlite3ext.h; do
  if [ ! -f "$AMALG/$f" ]; then
    echo "FAIL newer:layout: $AMALG/$f is missing (the package's layout changed?)"
    exit 1
  fi
done
pkgver=$(node -p 'require("./tests/js/node_modules/better-sqlite3/package.json").version' 2>/dev/null)
want=$(node -p 'require("./tests/js/package-lock.json").packages["node_modules/better-sqlite3"].version' 2>/dev/null)
if [ -n "$want" ] && [ "$pkgver" = "$want" ]; then
  echo "PASS newer:package better-sqlite3 $pkgver (as pinned)"
else
  echo "FAIL newer:package: installed better-sqlite3 ${pkgver:-?} is not the pinned ${want:-?} (rm -rf $DIR/node_modules)"
  rc=1
fi

# The slow part: compiled once, reused while its inputs are unchanged.
if ! blog=$(make -s --no-print-directory compat 2>&1); then
  echo "FAIL newer:build: make compat failed:"
  tail -n 20 <<<"$blog" | sed 's/^/    /'
  exit 1
fi
echo "PASS newer:build"

runner=$OUT/sqltest
ext=$OUT/idempotency.so
hver=$(sed -n 's/^#define SQLITE_VERSION  *"\(.*\)"$/\1/p' "$AMALG/sqlite3.h")
lver=$("$runner" --eval 'SELECT sqlite_version()' 2>&1)
sysver=$(build/sqltest --eval 'SELECT sqlite_version()' 2>/dev/null || sqlite3 :memory: 'SELECT sqlite_version()' 2>/dev/null)
if [ -n "$hver" ] && [ "$lver" = "$hver" ]; then
  echo "PASS newer:sqlite-version $lver (system: ${sysver:-unknown})"
else
  echo "FAIL newer:sqlite-version: the runner reports '$lver', the amalgamation's sqlite3.h says '$hver'"
  rc=1
fi
# The runner must not be using the system library by accident.
if [ -n "$sysver" ] && [ "$lver" = "$sysver" ]; then
  echo "FAIL newer:is-newer: $lver is the system's SQLite too: this suite tests nothing 20-sql.sh does not"
  rc=1
else
  echo "PASS newer:is-newer"
fi
opts=$("$runner" --ext "$ext" --eval "SELECT sqlite_compileoption_used('ENABLE_STMTVTAB') AND sqlite_compileoption_used('DQS=0') AND NOT sqlite_compileoption_used('OMIT_LOAD_EXTENSION'), idem_version()" 2>&1)
if [ "$opts" = "1	$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)" ]; then
  echo "PASS newer:loads (STMTVTAB, DQS=0, load_extension on; idem_version matches include/idempotency.h)"
else
  echo "FAIL newer:loads: got '$opts'"
  rc=1
fi

# Each file in its own runner process, as in 20-sql.sh.
for f in tests/sql/[0-9]*.sql; do
  out=$("$runner" --ext "$ext" "$f" 2>&1)
  status=$?
  sed -e 's/^PASS /PASS newer:/' -e 's/^FAIL /FAIL newer:/' <<<"$out"
  if grep -q '^FAIL ' <<<"$out"; then
    rc=1
  elif [ "$status" -ne 0 ]; then
    echo "FAIL newer:$(basename "$f"): the runner exited with status $status without reporting a failed check"
    rc=1
  fi
done
exit $rc
