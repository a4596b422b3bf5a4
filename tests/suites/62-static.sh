#!/usr/bin/env bash
# The static build: ext/ compiled with -DSQLITE_CORE into
# $BUILD/static/libidempotency.a (tests/tests.mk, part of test-programs),
# and the programs linked with it against the system libsqlite3:
#
#   static_test      C; sqlite3_auto_extension, then idem_version, the first
#                    key vector, a ledger claim / in_progress / settle / replay
#   static_test_cxx  the same file compiled as C++ (idempotency.h first)
#   minver           the refusal on a too old SQLite (a test-only minimum of
#                    9.999.999): exact message, nothing registered, and the
#                    failure of sqlite3_open under sqlite3_auto_extension
#
# plus: the archive holds the entry point and no loadable-extension glue
# (sqlite3_api), and include/idempotency.h compiles with sqlite3.h in either
# order as C and C++ with -Wall -Wextra -Wpedantic -Werror.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
dir=$BUILD/static
lib=$dir/libidempotency.a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for p in "$lib" "$dir/static_test" "$dir/minver"; do
  if [ ! -e "$p" ]; then
    echo "FAIL static:setup: $p is missing (make test-programs)"
    exit 1
  fi
done

# The archive: the entry point defined, the real SQLite API referenced,
# no sqlite3_api pointer (that is the glue of a loadable extension).
syms=$(nm -g "$lib" 2>/dev/null)
if grep -qE ' T _?sqlite3_idempotency_init$' <<<"$syms" &&
   grep -qE ' U _?sqlite3_create_function$' <<<"$syms" &&
   ! grep -qE ' _?sqlite3_api$' <<<"$syms"; then
  echo "PASS static:archive (defines sqlite3_idempotency_init, calls SQLite directly, no sqlite3_api)"
else
  echo "FAIL static:archive: $lib lacks sqlite3_idempotency_init or still uses sqlite3_api (built without -DSQLITE_CORE?)"
fi

# run NAME PROGRAM ARGS...: its PASS/FAIL lines; a non-zero exit without a
# FAIL line (a crash, a sanitizer or TEST_WRAP report) is a failure.
run() {
  local name=$1 out rc
  shift
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(${TEST_WRAP:-} "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    echo "FAIL $name: exited with status $rc without reporting a failed check"
  fi
}
run static "$dir/static_test" static
if [ -x "$dir/static_test_cxx" ]; then
  run static-cxx "$dir/static_test_cxx" static-cxx
elif ! command -v g++ >/dev/null 2>&1; then
  echo "SKIP static-cxx: g++ is not installed (the C++ build of static_test)"
else
  echo "FAIL static-cxx:setup: $dir/static_test_cxx is missing (make test-programs)"
fi
run minver "$dir/minver"

# The public header next to sqlite3.h, both orders, C and C++.
cc=${CC:-cc}
for order in sqlite-first header-first; do
  if [ $order = sqlite-first ]; then
    printf '#include <sqlite3.h>\n#include "idempotency.h"\n' >"$tmp/h.c"
  else
    printf '#include "idempotency.h"\n#include <sqlite3.h>\n' >"$tmp/h.c"
  fi
  printf 'int (*entry)(sqlite3 *, char **, const sqlite3_api_routines *) = sqlite3_idempotency_init;\n' >>"$tmp/h.c"
  printf 'int main(void) { return sqlite3_auto_extension((void (*)(void))entry); }\n' >>"$tmp/h.c"
  if "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror -Iinclude -fsyntax-only "$tmp/h.c" 2>"$tmp/err"; then
    echo "PASS static:header-c:$order"
  else
    echo "FAIL static:header-c:$order: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
  fi
  if ! command -v g++ >/dev/null 2>&1; then
    echo "SKIP static:header-c++:$order: g++ is not installed"
  elif g++ -x c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -Iinclude -fsyntax-only "$tmp/h.c" 2>"$tmp/err"; then
    echo "PASS static:header-c++:$order"
  else
    echo "FAIL static:header-c++:$order: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
  fi
done
