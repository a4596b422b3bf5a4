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

# docs/install.md's static link ("Linking it into a program"), as written:
# the block marked as run by this suite, its make line at the top of the
# tree (the target this suite's programs come from), its cc line in a
# directory holding the page's C block as app.c beside include/ and build/
# of the tree; then the program, which makes its ledger in app.db.
if [ "$BUILD" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP static:docs-link: docs/install.md's lines link build/static with plain flags; this run's archive is $lib"
else
  page=docs/install.md
  cmds=$(awk '/^<!-- run by tests\/suites\/62-static.sh -->$/ { m = 1; next } m == 1 && /^```sh$/ { m = 2; next } m == 2 && /^```$/ { exit } m == 2' "$page")
  awk -v want="$(sed -n '2p' <<<"$cmds")" 'f == 0 && $0 == "```c" && seen { f = 1; next } f == 1 && /^```$/ { exit } f == 1 { print } index($0, want) == 1 { seen = 1 }' "$page" >"$tmp/app.c"
  link=$tmp/link
  mkdir -p "$link"
  mv "$tmp/app.c" "$link/app.c"
  ln -s "$PWD/include" "$link/include"
  ln -s "$PWD/build" "$link/build"
  if [ "$(wc -l <<<"$cmds")" -ne 2 ] || [ "$(sed -n '1p' <<<"$cmds" | sed 's/ *#.*//')" != "make static" ] || [ ! -s "$link/app.c" ]; then
    echo "FAIL static:docs-link: $page has no block marked as run by this suite holding make static, one cc line and a C block after it: $(tr '\n' '|' <<<"$cmds")"
  elif ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL bash -c "$(sed -n '1p' <<<"$cmds")" 2>&1); then
    echo "FAIL static:docs-link: $(sed -n '1p' <<<"$cmds") failed: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
  elif ! out=$(cd "$link" && bash -c "$(sed -n '2p' <<<"$cmds")" 2>&1); then
    echo "FAIL static:docs-link: $(sed -n '2p' <<<"$cmds") failed: $(head -n 3 <<<"$out" | tr '\n' ' ')"
  elif ! (cd "$link" && ./a.out); then
    echo "FAIL static:docs-link: the program of $page exited with status $?"
  elif [ "$(sqlite3 "$link/app.db" "SELECT count(*) FROM sqlite_schema WHERE name = 'ledger_rows'")" != 1 ]; then
    echo "FAIL static:docs-link: the program of $page made no ledger in app.db"
  else
    echo "PASS static:docs-link ($page's make static and cc line as written, the program made its ledger)"
  fi
fi

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
