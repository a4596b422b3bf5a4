#!/usr/bin/env bash
# Builds the extension for one release platform and checks it.
#
#   bash bindings/dist-lib.sh PLATFORM OUT SOURCE...      (make dist runs it)
#
# PLATFORM is linux-x64 or linux-arm64. The platform of this machine is
# built with CC (cc); the other one with a cross compiler, DIST_CC_X64
# (x86_64-linux-gnu-gcc) or DIST_CC_ARM64 (aarch64-linux-gnu-gcc: Debian's
# gcc-aarch64-linux-gnu). The extension needs at build time only SQLite's
# headers (sqlite3.h, sqlite3ext.h: it never links libsqlite3, the host
# program provides SQLite) and xxHash's header (xxhash.h, inlined); these
# are the same on every machine, so a cross build takes them from this
# machine's include directories, copied into a directory of their own
# (passing /usr/include itself would mix this machine's C library headers
# into the cross build). DIST_CFLAGS (-O2) sets the optimisation; the
# result carries no debug information. bindings/check-lib.sh then checks the
# machine, the libraries it needs and its glibc symbol versions (its line is
# printed by bindings/dist.sh, in platform order; a failure here).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "dist: $*" >&2; exit 1; }

[ $# -ge 3 ] || die "usage: dist-lib.sh PLATFORM OUT SOURCE..."
plat=$1 out=$2
shift 2

[ "$(uname -s)" = Linux ] || die "the release libraries are built on Linux (x86_64 or aarch64), not $(uname -s)"
case "$(uname -m)" in
  x86_64) host=linux-x64 ;;
  aarch64 | arm64) host=linux-arm64 ;;
  *) die "the release libraries are built on an x86_64 or aarch64 Linux machine, not $(uname -m)" ;;
esac
case "$plat" in
  linux-x64) cross=${DIST_CC_X64:-x86_64-linux-gnu-gcc} crosspkg=gcc-x86-64-linux-gnu crosslibc=libc6-dev-amd64-cross ;;
  linux-arm64) cross=${DIST_CC_ARM64:-aarch64-linux-gnu-gcc} crosspkg=gcc-aarch64-linux-gnu crosslibc=libc6-dev-arm64-cross ;;
  *) die "unknown platform '$plat' (the release platforms are linux-x64 and linux-arm64)" ;;
esac

native=${CC:-cc}
read -r -a native_cc <<<"$native"
command -v "${native_cc[0]}" >/dev/null 2>&1 || die "no C compiler '$native' (Debian: apt-get install gcc)"

mkdir -p "$(dirname "$out")"
incflags=()
if [ "$plat" = "$host" ]; then
  read -r -a compiler <<<"$native"
else
  read -r -a compiler <<<"$cross"
  command -v "${compiler[0]}" >/dev/null 2>&1 ||
    die "no cross compiler '$cross' to build $plat (Debian: apt-get install $crosspkg $crosslibc), or build this machine's platform only: make dist (PLATFORMS=$host)"
  # the compiler without its C library's headers (a recommends left out)
  printf '#include <stdint.h>\nint x;\n' | "${compiler[@]}" -x c -c -o /dev/null - 2>/dev/null ||
    die "the cross compiler '$cross' finds no C library headers for $plat (Debian: apt-get install $crosslibc), or build this machine's platform only: make dist (PLATFORMS=$host)"
  # The headers, located by this machine's compiler, copied alone.
  inc=$(mktemp -d)
  trap 'rm -rf "$inc"' EXIT
  deps=$(printf '#include <sqlite3ext.h>\n#include <xxhash.h>\n' | "${native_cc[@]}" -M -x c - 2>&1) ||
    die "this machine lacks SQLite's or xxHash's headers (Debian: apt-get install libsqlite3-dev libxxhash-dev): $(grep -m 1 'error' <<<"$deps")"
  for h in sqlite3.h sqlite3ext.h xxhash.h; do
    f=$(tr ' \\' '\n\n' <<<"$deps" | grep -m 1 "/$h\$") || die "the compiler's dependencies of sqlite3ext.h and xxhash.h do not show $h"
    cp "$f" "$inc/$h"
  done
  incflags=(-I"$inc")
fi

# shellcheck disable=SC2086 # DIST_CFLAGS is a list of flags
"${compiler[@]}" ${DIST_CFLAGS:--O2} -Wall -Wextra -Wshadow -Wno-unused-parameter -std=gnu11 -fPIC \
  -fvisibility=hidden -Iinclude -Iext "${incflags[@]}" -shared -s -o "$out" "$@" -lm ||
  { rm -f "$out"; die "building $plat with ${compiler[*]} failed"; }
# a library that fails the check is removed, so that make builds it again
bash bindings/check-lib.sh "$plat" "$out" 2.17 >/dev/null || { rm -f "$out"; exit 1; }
