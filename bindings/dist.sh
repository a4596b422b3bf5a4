#!/usr/bin/env bash
# make dist (make release): every release artifact, and SHA256SUMS, in DIST.
#
#   bash bindings/dist.sh DIST "PLATFORMS" [python] [node]    (both when none is named)
#
# PLATFORMS are linux-x64 and/or linux-arm64 (make dist: this machine's,
# unless PLATFORMS names more); the library of each is
# DIST/lib/PLATFORM/idempotency.so, built and checked by bindings/dist-lib.sh
# (the Makefile's dist target). Writes into DIST (docs/install.md says what
# each is for and how a release is published):
#   sqlite_idempotency-V-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#   sqlite_idempotency-V-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl
#       python3 setup.py bdist_wheel (Debian's python3-setuptools and
#       python3-wheel) of a staging copy of bindings/python holding the
#       library; then checked by bindings/check-wheel.py
#   sqlite_idempotency-V.tar.gz           python3 setup.py sdist: the C sources
#   sqlite-idempotency-V.tgz              npm pack: the API, no library
#   sqlite-idempotency-linux-x64-V.tgz    npm pack: the library alone, os/cpu
#   sqlite-idempotency-linux-arm64-V.tgz
#   SHA256SUMS                            of all the above and lib/*/idempotency.so
# built from staging copies under DIST/stage (removed when done), never in
# the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -ge 2 ] || { echo "usage: dist.sh DIST \"PLATFORMS\" [python] [node]" >&2; exit 2; }
DIST=$1
read -r -a platforms <<<"$2"
shift 2
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(python node)
PY=${PYTHON:-/usr/bin/python3}
GLIBC=2.17 # the manylinux tag's glibc: manylinux_2_17, alias manylinux2014

die() { echo "dist: $*" >&2; exit 1; }

[ ${#platforms[@]} -gt 0 ] || die "no platforms named (linux-x64, linux-arm64)"
version=$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)
py_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' bindings/python/sqlite_idempotency/__init__.py)
node_version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' bindings/node/package.json)
[ "$py_version" = "$version" ] || die "bindings/python says version '$py_version', include/idempotency.h says '$version'"
[ "$node_version" = "$version" ] || die "bindings/node/package.json says version '$node_version', include/idempotency.h says '$version'"

# the wheel's platform tag, the npm package's cpu
wheel_tag() {
  case "$1" in
    linux-x64) echo "manylinux_${GLIBC/./_}_x86_64.manylinux2014_x86_64" ;;
    linux-arm64) echo "manylinux_${GLIBC/./_}_aarch64.manylinux2014_aarch64" ;;
    *) die "unknown platform '$1' (linux-x64 or linux-arm64)" ;;
  esac
}
npm_cpu() { case "$1" in linux-x64) echo x64 ;; linux-arm64) echo arm64 ;; esac; }

for plat in "${platforms[@]}"; do
  wheel_tag "$plat" >/dev/null
  lib=$DIST/lib/$plat/idempotency.so
  [ -f "$lib" ] || die "no library for $plat at $lib (make dist builds it)"
  bash bindings/check-lib.sh "$plat" "$lib" "$GLIBC"
done

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd) # absolute: the builds below run in the staging copies
stage=$DIST/stage
rm -rf "$stage"
mkdir -p "$stage"
rm -f "$DIST"/sqlite_idempotency-*.whl "$DIST"/sqlite_idempotency-*.tar.gz "$DIST"/sqlite-idempotency-*.tgz "$DIST/SHA256SUMS"

for part in "${parts[@]}"; do
  case "$part" in
    python)
      "$PY" -c 'import setuptools, wheel' 2>/dev/null ||
        die "$PY lacks setuptools or wheel (Debian: apt-get install python3-setuptools python3-wheel)"
      py_stage() { # a copy of the Python package, no bytecode
        mkdir -p "$1"
        cp -r bindings/python/pyproject.toml bindings/python/setup.py bindings/python/README.md \
          bindings/python/MANIFEST.in bindings/python/sqlite_idempotency LICENSE "$1/"
        find "$1" -name __pycache__ -prune -exec rm -rf {} +
        find "$1/sqlite_idempotency" \( -name '*.so' -o -name '*.so.*' -o -name '*.dylib' \) -delete
        cp bindings/node/words.json bindings/node/serve.html "$1/sqlite_idempotency/" # the one table of words and the page, kept in bindings/node
      }
      for plat in "${platforms[@]}"; do
        dir=$stage/python-$plat
        py_stage "$dir"
        cp "$DIST/lib/$plat/idempotency.so" "$dir/sqlite_idempotency/"
        (cd "$dir" && "$PY" setup.py -q bdist_wheel --plat-name "$(wheel_tag "$plat")" --dist-dir "$DIST" >build.log 2>&1) ||
          { cat "$dir/build.log" >&2; die "the $plat wheel build failed"; }
        whl=$DIST/sqlite_idempotency-$version-py3-none-$(wheel_tag "$plat").whl
        [ -f "$whl" ] || die "the $plat wheel build wrote no $(basename "$whl"): $(ls "$DIST")"
        "$PY" bindings/check-wheel.py "$whl" >/dev/null
      done
      # the sdist: the package and the C sources; xxHash's header travels
      # with its licence, SQLite's headers come from the installing machine
      dir=$stage/python-sdist
      py_stage "$dir"
      mkdir -p "$dir/csrc/ext" "$dir/csrc/include" "$dir/csrc/xxhash"
      cp ext/*.c ext/*.h "$dir/csrc/ext/"
      cp include/idempotency.h "$dir/csrc/include/"
      xxh=$(printf '#include <xxhash.h>\n' | ${CC:-cc} -M -x c - 2>/dev/null | tr ' \\' '\n\n' | grep -m 1 '/xxhash\.h$') ||
        die "xxHash's header xxhash.h is not installed (Debian: apt-get install libxxhash-dev)"
      cp "$xxh" "$dir/csrc/xxhash/xxhash.h"
      xxh_licence=/usr/share/doc/libxxhash-dev/copyright
      [ -f "$xxh_licence" ] || die "no licence file for xxhash.h at $xxh_licence (Debian: apt-get install libxxhash-dev)"
      cp "$xxh_licence" "$dir/csrc/xxhash/LICENSE"
      (cd "$dir" && "$PY" setup.py -q sdist --formats=gztar --dist-dir "$DIST" >build.log 2>&1) ||
        { cat "$dir/build.log" >&2; die "the sdist build failed"; }
      [ -f "$DIST/sqlite_idempotency-$version.tar.gz" ] || die "the sdist build wrote no sqlite_idempotency-$version.tar.gz: $(ls "$DIST")"
      ;;
    node)
      command -v npm >/dev/null 2>&1 || die "npm is not installed"
      command -v node >/dev/null 2>&1 || die "node is not installed"
      # the main package names every platform package, at its own version
      want=$(for p in linux-x64 linux-arm64; do echo "sqlite-idempotency-$p@$version"; done)
      got=$(node -e 'const o = require(process.argv[1]).optionalDependencies || {};
        console.log(Object.entries(o).map(([k, v]) => `${k}@${v}`).sort().join("\n"))' "$ROOT/bindings/node/package.json")
      [ "$got" = "$(sort <<<"$want")" ] ||
        die "bindings/node/package.json's optionalDependencies are '$(tr '\n' ' ' <<<"$got")', want '$(tr '\n' ' ' <<<"$want")'"
      # the package's "files" (package.json) choose what npm pack takes
      mkdir -p "$stage/node"
      cp -r bindings/node/. "$stage/node/"
      rm -rf "$stage/node/node_modules" "$stage/node/prebuilds"
      cp LICENSE "$stage/node/"
      (cd "$stage/node" && npm pack --silent --pack-destination "$DIST" >/dev/null) || die "npm pack of sqlite-idempotency failed"
      [ -f "$DIST/sqlite-idempotency-$version.tgz" ] || die "npm pack wrote no sqlite-idempotency-$version.tgz"
      for plat in "${platforms[@]}"; do
        name=sqlite-idempotency-$plat
        dir=$stage/npm-$plat
        mkdir -p "$dir"
        cp "$DIST/lib/$plat/idempotency.so" LICENSE "$dir/"
        node -e 'const [name, version, cpu] = process.argv.slice(1);
          const pkg = {
            name, version,
            description: `The sqlite-idempotency SQLite extension for Linux ${cpu} (glibc 2.17 or newer); installed by sqlite-idempotency as an optional dependency`,
            license: "MIT",
            keywords: ["sqlite", "sqlite-extension", "idempotency"],
            os: ["linux"], cpu: [cpu], libc: ["glibc"],
            files: ["idempotency.so", "LICENSE", "README.md"],
          };
          console.log(JSON.stringify(pkg, null, 2));' "$name" "$version" "$(npm_cpu "$plat")" >"$dir/package.json"
        cat >"$dir/README.md" <<EOF
# $name

The [sqlite-idempotency](https://www.npmjs.com/package/sqlite-idempotency)
SQLite extension built for Linux $(npm_cpu "$plat") (glibc 2.17 or newer):
\`idempotency.so\` and nothing else. Install \`sqlite-idempotency\`, not this
package: npm installs the package of the running platform as one of its
optional dependencies, and \`getLoadablePath()\` finds it.
EOF
        (cd "$dir" && npm pack --silent --pack-destination "$DIST" >/dev/null) || die "npm pack of $name failed"
        [ -f "$DIST/$name-$version.tgz" ] || die "npm pack wrote no $name-$version.tgz"
      done
      ;;
    *) die "unknown part '$part' (python or node)" ;;
  esac
done

rm -rf "$stage"
(
  cd "$DIST"
  shopt -s nullglob
  files=(*.whl *.tar.gz *.tgz)
  for plat in "${platforms[@]}"; do files+=("lib/$plat/idempotency.so"); done
  sha256sum -- "${files[@]}" >SHA256SUMS
) || die "sha256sum failed"
(cd "$DIST" && awk '{ print $2 }' SHA256SUMS)
