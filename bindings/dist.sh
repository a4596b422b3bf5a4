#!/usr/bin/env bash
# make dist: the language packages, each carrying the built extension.
#
#   bash bindings/dist.sh DIST LIB [python] [node]    (both when none is named)
#
# LIB is the extension built for distribution; it links nothing but the C
# library (and libm), so a package carries that one file and needs nothing
# else from the system. Writes into DIST:
#   sqlite_idempotency-<version>-py3-none-<platform>.whl   (python3 setup.py
#       bdist_wheel with Debian's python3-setuptools and python3-wheel)
#   sqlite-idempotency-<version>.tgz                        (npm pack)
# built from staging copies under DIST/stage, never in the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
DIST=$1 LIB=$2
shift 2
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(python node)
PY=${PYTHON:-/usr/bin/python3}

die() { echo "dist: $*" >&2; exit 1; }

version=$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)
py_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' bindings/python/sqlite_idempotency/__init__.py)
node_version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' bindings/node/package.json)
[ "$py_version" = "$version" ] || die "bindings/python says version '$py_version', include/idempotency.h says '$version'"
[ "$node_version" = "$version" ] || die "bindings/node/package.json says version '$node_version', include/idempotency.h says '$version'"
[ -f "$LIB" ] || die "no extension at $LIB"

# The extension needs nothing but the C library: any other library it
# links would be missing on a user's machine, so the build stops naming it.
if [ "$(uname -s)" = Linux ]; then
  deps=$(ldd "$LIB") || die "ldd $LIB failed"
  other=$(awk '$1 !~ /^(linux-vdso|libc|libm|libdl|libpthread|librt)\.so|^\/|ld-linux/ { print $1 }' <<<"$deps")
  [ -z "$other" ] || die "$LIB links $other, which the packages do not carry"
fi

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd) # absolute: the builds below run in the staging copies
stage=$DIST/stage
rm -rf "$stage"
mkdir -p "$stage"

for part in "${parts[@]}"; do
  case "$part" in
    python)
      "$PY" -c 'import setuptools, wheel' 2>/dev/null ||
        die "$PY lacks setuptools or wheel (Debian: apt-get install python3-setuptools python3-wheel)"
      mkdir -p "$stage/python"
      cp -r bindings/python/pyproject.toml bindings/python/setup.py bindings/python/README.md \
        bindings/python/sqlite_idempotency LICENSE "$stage/python/"
      find "$stage/python" -name __pycache__ -prune -exec rm -rf {} +
      cp "$LIB" "$stage/python/sqlite_idempotency/"
      rm -f "$DIST"/sqlite_idempotency-*.whl
      (cd "$stage/python" && "$PY" setup.py -q bdist_wheel --dist-dir "$DIST" >build.log 2>&1) ||
        { cat "$stage/python/build.log" >&2; die "the wheel build failed"; }
      ls "$DIST"/sqlite_idempotency-"$version"-py3-none-*.whl
      ;;
    node)
      command -v npm >/dev/null 2>&1 || die "npm is not installed"
      plat=$(node -p 'process.platform + "-" + process.arch')
      mkdir -p "$stage/node/prebuilds/$plat"
      # the package's "files" (package.json) choose what npm pack takes
      cp -r bindings/node/. "$stage/node/"
      cp LICENSE "$stage/node/"
      cp "$LIB" "$stage/node/prebuilds/$plat/"
      rm -f "$DIST"/sqlite-idempotency-*.tgz
      (cd "$stage/node" && npm pack --silent --pack-destination "$DIST" >/dev/null) ||
        die "npm pack failed"
      ls "$DIST/sqlite-idempotency-$version.tgz"
      ;;
    *) die "unknown part '$part' (python or node)" ;;
  esac
done
