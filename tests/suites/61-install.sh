#!/usr/bin/env bash
# `make install`: with PREFIX=/usr DESTDIR=<tmp> (a packager's staged
# install) and with PREFIX=<tmp> alone. Checks the two installed files
# (the extension in PREFIX/lib/sqlite3, the public header in
# PREFIX/include), their modes and contents, that nothing else is
# installed, that the extension links no cJSON (ldd, nm -D), and that
# the installed extension loads in the sqlite3 shell by its path without
# suffix and works.
#
# In a sanitized build (make sanitize) the installed extension carries the
# ASan runtime, which the plain sqlite3 shell cannot load: the load check
# skips there, saying so; the layout checks still run.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
so=so
[ "$(uname -s)" = Darwin ] && so=dylib

mode() { stat -c %a "$1" 2>/dev/null || stat -f %Lp "$1"; }

# check_tree NAME ROOT: ROOT/lib/sqlite3/idempotency.$so and
# ROOT/include/idempotency.h, and nothing else under ROOT.
check_tree() {
  local name=$1 root=$2 lib=$2/lib/sqlite3/idempotency.$so hdr=$2/include/idempotency.h
  if [ -f "$lib" ] && [ "$(mode "$lib")" = 755 ] && cmp -s "$lib" "$BUILD/idempotency.$so"; then
    echo "PASS install:$name:extension (lib/sqlite3/idempotency.$so, mode 755, same bytes as $BUILD)"
  else
    echo "FAIL install:$name:extension: $lib missing, mode $(mode "$lib" 2>/dev/null) (want 755), or not $BUILD/idempotency.$so"
  fi
  if [ -f "$hdr" ] && [ "$(mode "$hdr")" = 644 ] && cmp -s "$hdr" include/idempotency.h; then
    echo "PASS install:$name:header (include/idempotency.h, mode 644)"
  else
    echo "FAIL install:$name:header: $hdr missing, mode $(mode "$hdr" 2>/dev/null) (want 644), or not include/idempotency.h"
  fi
  local extra
  extra=$(cd "$root" && find . -type f ! -path "./lib/sqlite3/idempotency.$so" ! -path ./include/idempotency.h)
  if [ -z "$extra" ]; then
    echo "PASS install:$name:nothing-else"
  else
    echo "FAIL install:$name:nothing-else: also installed: $(tr '\n' ' ' <<<"$extra")"
  fi
}

# check_load NAME LIB: the sqlite3 shell loads LIB (path without suffix).
check_load() {
  local name=$1 lib=$2 out
  if [ -n "${SANITIZE:-}" ] || [ "$BUILD" != build ]; then
    echo "SKIP install:$name:load: the $BUILD extension is sanitized; the plain sqlite3 shell cannot load it (checked in the plain build)"
    return
  fi
  if ! command -v sqlite3 >/dev/null 2>&1; then
    echo "SKIP install:$name:load: the sqlite3 shell is not installed (Debian package sqlite3)"
    return
  fi
  out=$(sqlite3 :memory: ".load \"$lib\"" \
    "SELECT idem_version(), idem_key('acme','conv-1','create_invoice','{\"amount\":100,\"currency\":\"EUR\"}');" \
    "CREATE VIRTUAL TABLE L USING idempotency;" \
    "SELECT json_extract(idem_claim('L','t','c','x','{}'),'\$.decision');" 2>&1)
  want="$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)|idem1-4257073ab9902f2ce55b370ab3000e94
admitted"
  if [ "$out" = "$want" ]; then
    echo "PASS install:$name:load (.load $lib; idem_version, idem_key vector, a claim)"
  else
    echo "FAIL install:$name:load: got: $(tr '\n' ' ' <<<"$out")"
  fi
}

# 0. the extension links no JSON library: it has its own strict parser
# (cJSON accepts 01, .5, duplicate names and lone surrogates), so neither
# the dynamic section nor the undefined symbols name cJSON.
ext_so=$BUILD/idempotency.$so
if [ "$(uname -s)" != Linux ]; then
  echo "SKIP install:no-cjson: ldd and nm -D are checked on Linux only"
elif ! command -v nm >/dev/null 2>&1; then
  echo "SKIP install:no-cjson: nm is not installed (Debian package binutils)"
elif ! linked=$(ldd "$ext_so" 2>&1) || ! syms=$(nm -D "$ext_so" 2>&1); then
  echo "FAIL install:no-cjson: ldd or nm -D failed on $ext_so: $linked $syms"
elif grep -qi cjson <<<"$linked"; then
  echo "FAIL install:no-cjson: $ext_so links $(grep -i cjson <<<"$linked" | awk '{ print $1 }' | tr '\n' ' ')"
elif grep -qi cjson <<<"$syms"; then
  echo "FAIL install:no-cjson: $ext_so refers to $(grep -i cjson <<<"$syms" | awk '{ print $NF }' | tr '\n' ' ')"
elif ! grep -qE ' T sqlite3_idempotency_init$' <<<"$syms"; then
  echo "FAIL install:no-cjson: nm -D $ext_so does not list sqlite3_idempotency_init (the check would prove nothing)"
else
  echo "PASS install:no-cjson (ldd and nm -D of $ext_so name no cJSON)"
fi

# 1. staged: PREFIX=/usr DESTDIR=tmp/stage
if log=$(make -s --no-print-directory install PREFIX=/usr DESTDIR="$tmp/stage" 2>&1); then
  echo "PASS install:destdir:make"
  check_tree destdir "$tmp/stage/usr"
  check_load destdir "$tmp/stage/usr/lib/sqlite3/idempotency"
else
  echo "FAIL install:destdir:make: make install PREFIX=/usr DESTDIR=... failed: $(tail -n 3 <<<"$log" | tr '\n' ' ')"
fi

# 2. PREFIX alone
prefix="$tmp/pre fix"
if log=$(make -s --no-print-directory install PREFIX="$prefix" 2>&1); then
  echo "PASS install:prefix:make"
  check_tree prefix "$prefix"
  check_load prefix "$prefix/lib/sqlite3/idempotency"
else
  echo "FAIL install:prefix:make: make install PREFIX=<tmp> failed: $(tail -n 3 <<<"$log" | tr '\n' ' ')"
fi

# 3. a C program compiled against the installed header only
if command -v "${CC:-cc}" >/dev/null 2>&1 && [ -f "$tmp/stage/usr/include/idempotency.h" ]; then
  printf '#include <sqlite3.h>\n#include <idempotency.h>\nint (*init)(sqlite3 *, char **, const sqlite3_api_routines *) = sqlite3_idempotency_init;\nint main(void){return init && IDEM_VERSION_NUMBER > 0 ? 0 : 1;}\n' >"$tmp/use.c"
  if "${CC:-cc}" -Wall -Wextra -Werror -fsyntax-only -I"$tmp/stage/usr/include" "$tmp/use.c" 2>"$tmp/cc.log"; then
    echo "PASS install:header-usable (compiles with -I<prefix>/include)"
  else
    echo "FAIL install:header-usable: $(head -n 3 "$tmp/cc.log" | tr '\n' ' ')"
  fi
fi
