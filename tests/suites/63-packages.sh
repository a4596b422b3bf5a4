#!/usr/bin/env bash
# The release artifacts as a registry checks them and a user installs them
# (bindings/, `make dist`, docs/install.md):
#
#   dist     make dist alone would build this machine's platform only (a
#            dry run says so); make dist PLATFORMS="linux-x64 linux-arm64"
#            builds the extension for both (the other one cross-compiled;
#            this machine's alone without its compiler), the manylinux_2_17 wheels, the sdist, the npm
#            package and its platform packages, and SHA256SUMS; its output
#            and the docs' other commands are compared with docs/install.md;
#            the glibc symbol check refuses a library that needs a newer
#            glibc, another machine's library, or one that links
#            libsqlite3; the wheel check (what PyPI checks) refuses a
#            tampered RECORD and a linux_x86_64 tag; python3 -m wheel
#            unpack verifies every RECORD hash
#   python   the x86_64 wheel installed with pip --no-index into a fresh
#            virtual environment (Debian's /usr/bin/python3 -m venv): the
#            package tests (tests/python/test_package_py.py), the HTTP
#            adapter example against the counting target (tests/python/test_server.py),
#            the docs' Python example; pip refuses the aarch64 wheel here
#            and takes it for --platform manylinux_2_17_aarch64; the sdist
#            built from source by pip (setuptools and wheel from Debian's
#            python3-*-whl), and its messages when the compiler or SQLite's
#            headers are missing
#   node     the npm package installed into a fresh npm project in which
#            npm chooses the platform package by os/cpu (overrides point
#            the optional dependencies at the tarballs, as the registry
#            would serve them), and docs/install.md's npm install of the
#            two tarballs as written, in a project without overrides;
#            beside better-sqlite3 12 (linked from tests/js/node_modules)
#            and libsql: the package tests per
#            driver, the HTTP adapter example per driver, node:sqlite where
#            the running Node has it and on Node 24 and 22 from npm, Bun's
#            Database (bun:sqlite) on Bun from npm, the docs' JavaScript example; tsc
#            (typescript 5) checks index.d.ts (tests/js/consumer_package.ts,
#            misuse_package.ts); getLoadablePath()'s messages when the platform
#            package is missing (--omit=optional), of another version or
#            without its library, and on another platform
#            (tests/js/test_loadable_path.mjs); npm --cpu=arm64 takes
#            the arm64 package; npm resolves the optional peers beside
#            Mastra 1 and Mastra 0.24 (its ai@4)
#   arm64    the arm64 library (from the wheel pip installs for aarch64,
#            and the same bytes in the npm package) runs the smoke test
#            (tests/c/smoke.c: load, claim, settle, replay) under
#            qemu-user with Debian's arm64 libc6 and libsqlite3-0, and
#            prints what the x86_64 library prints natively
#
# A runtime that is absent skips, saying why. The packages are built from
# the sources with the plain compiler flags, also under make sanitize (an
# interpreter cannot load an ASan build).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
. tests/lib/interp.sh
LIBSQL_VERSION=0.5.29

# The packages carry the plain build (make dist links nothing but the C
# library); the sanitized and valgrind runs test the same C in the other suites.
if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP packages: runs in make test only: make dist packages the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi

rc=0
host_smoke=() other_smoke=() # ID|LABEL|LIBRARY (without suffix) for the smoke test
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- which parts can run ------------------------------------------------------
parts=()
if [ ! -x "$PY" ]; then
  echo "SKIP packages.python: $PY is not installed (Debian: apt-get install python3)"
elif ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "SKIP packages.python: $PY cannot make a virtual environment (Debian: apt-get install python3-venv)"
elif ! "$PY" -c 'import setuptools, wheel' 2>/dev/null; then
  echo "SKIP packages.python: $PY cannot build a wheel (Debian: apt-get install python3-setuptools python3-wheel)"
elif python_skip packages; then
  :
else
  parts+=(python)
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP packages.node: node is not installed"
elif ! command -v npm >/dev/null 2>&1; then
  echo "SKIP packages.node: npm is not installed"
elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "SKIP packages.node: node $(node --version) is older than better-sqlite3 12 supports (20+)"
else
  parts+=(node)
fi
[ ${#parts[@]} -gt 0 ] || exit 0

# --- which platforms ------------------------------------------------------------
# This machine's platform is built natively, the other one cross-compiled.
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) host=linux-x64 other=linux-arm64 other_cc=aarch64-linux-gnu-gcc other_pkg=gcc-aarch64-linux-gnu other_libc=libc6-dev-arm64-cross
    qarch=aarch64 qloader=ld-linux-aarch64.so.1 debarch=arm64 ;;
  Linux-aarch64) host=linux-arm64 other=linux-x64 other_cc=x86_64-linux-gnu-gcc other_pkg=gcc-x86-64-linux-gnu other_libc=libc6-dev-amd64-cross
    qarch=x86_64 qloader=ld-linux-x86-64.so.2 debarch=amd64 ;;
  *) echo "SKIP packages: the release packages are built on Linux x86_64 or aarch64, not $(uname -s) $(uname -m)"; exit 0 ;;
esac
if ! command -v "$other_cc" >/dev/null 2>&1; then
  platforms=("$host")
  echo "SKIP packages.$other: no $other_cc to cross-compile the $other build (Debian: apt-get install $other_pkg); make dist builds $host only"
elif ! printf '#include <stdint.h>\nint x;\n' | "$other_cc" -x c -c -o /dev/null - 2>/dev/null; then
  platforms=("$host")
  echo "SKIP packages.$other: $other_cc finds no C library headers for $other (Debian: apt-get install $other_libc); make dist builds $host only"
else
  platforms=(linux-x64 linux-arm64) # make dist's order
fi
built() { [[ " ${platforms[*]} " == *" $1 "* ]]; }
wheel_tag() { case "$1" in linux-x64) echo manylinux_2_17_x86_64.manylinux2014_x86_64 ;; *) echo manylinux_2_17_aarch64.manylinux2014_aarch64 ;; esac; }
npm_cpu() { case "$1" in linux-x64) echo x64 ;; *) echo arm64 ;; esac; }

# --- make dist, as docs/install.md shows it ---------------------------------------
DIST=$tmp/dist
version=$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)
docs=$tmp/docs
if ! out=$("$PY" tests/python/doc_blocks.py docs/install.md "$docs" 2>&1); then
  echo "FAIL packages.docs:blocks: $out"
  rc=1
fi
# the docs' commands run from the project root against $DIST for build/dist
doc_cmd() { grep -lx "$1" "$docs"/*.cmd 2>/dev/null | head -n 1; }
make_cmd=$(doc_cmd 'make dist PLATFORMS="linux-x64 linux-arm64"')
[ -n "$make_cmd" ] || { echo "FAIL packages.docs:make-dist: docs/install.md shows no \`\$ make dist PLATFORMS=\"linux-x64 linux-arm64\"\`"; rc=1; }
# make dist alone builds this machine's platform (no cross compiler needed)
if dry=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -n dist BUILD="$tmp/build" DIST="$DIST" 2>&1) &&
  [ "$(grep -o 'dist-lib\.sh [a-z0-9-]*' <<<"$dry" | tr '\n' ' ')" = "dist-lib.sh $host " ]; then
  echo "PASS packages.dist:host-only (make dist builds $host alone)"
else
  echo "FAIL packages.dist:host-only: make -n dist would build: $(grep -o 'dist-lib\.sh [a-z0-9-]*' <<<"$dry" | tr '\n' ' ') $(tail -n 2 <<<"$dry" | tr '\n' ' ')"
  rc=1
fi
if ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j2 dist \
  BUILD="$tmp/build" DIST="$DIST" PLATFORMS="${platforms[*]}" DIST_PARTS="${parts[*]}" 2>&1); then
  printf '%s\n' "$out"
  echo "FAIL packages.dist: make dist failed"
  exit 1
fi
if [ -n "$make_cmd" ]; then
  if [ "${parts[*]}" != "python node" ] || [ ${#platforms[@]} -ne 2 ]; then
    echo "SKIP packages.docs:make-dist: make dist built ${parts[*]} for ${platforms[*]} only, not what docs/install.md shows"
  elif got=$(sed "s|$DIST|build/dist|g" <<<"$out") && [ "$got" = "$(cat "${make_cmd%.cmd}.out")" ]; then
    echo "PASS packages.docs:make-dist (make dist prints what docs/install.md shows)"
  else
    echo "FAIL packages.docs:make-dist: make dist printed: $(tr '\n' '|' <<<"$got") docs/install.md shows: $(tr '\n' '|' <"${make_cmd%.cmd}.out")"
    rc=1
  fi
fi

# Every artifact, listed in SHA256SUMS, and nothing else left in DIST.
want=()
if [[ " ${parts[*]} " == *" python "* ]]; then
  for p in "${platforms[@]}"; do want+=("sqlite_idempotency-$version-py3-none-$(wheel_tag "$p").whl"); done
  want+=("sqlite_idempotency-$version.tar.gz")
fi
if [[ " ${parts[*]} " == *" node "* ]]; then
  want+=("sqlite-idempotency-$version.tgz")
  for p in "${platforms[@]}"; do want+=("sqlite-idempotency-$p-$version.tgz"); done
fi
for p in "${platforms[@]}"; do want+=("lib/$p/idempotency.so"); done
listed=$(awk '{ print $2 }' "$DIST/SHA256SUMS" 2>/dev/null | sort | tr '\n' ' ')
top=$(ls "$DIST" | sort | tr '\n' ' ')
want_top=$( (printf '%s\n' "${want[@]}" | grep -v '^lib/'; echo lib; echo SHA256SUMS) | sort | tr '\n' ' ')
if [ "$listed" = "$(printf '%s\n' "${want[@]}" | sort | tr '\n' ' ')" ] && [ "$top" = "$want_top" ] &&
  (cd "$DIST" && sha256sum -c --quiet SHA256SUMS >/dev/null 2>&1); then
  echo "PASS packages.dist:artifacts (${#want[@]} artifacts, each in SHA256SUMS, sha256sum -c agrees)"
else
  echo "FAIL packages.dist:artifacts: SHA256SUMS lists '$listed', DIST holds '$top'; want '${want[*]}' and '$want_top'"
  rc=1
fi
# the docs' other commands, as written (build/dist is $DIST)
for cmd in "$docs"/*.cmd; do
  [ -f "$cmd" ] && [ "$cmd" != "$make_cmd" ] || continue
  c=$(sed "s|build/dist|$DIST|g" "$cmd")
  if [ "${parts[*]}" != "python node" ] || [ ${#platforms[@]} -ne 2 ]; then
    echo "SKIP packages.docs:$(basename "$cmd" .cmd): not every artifact was built"
    continue
  fi
  got=$(bash -c "$c" 2>&1 | sed "s|$DIST|build/dist|g")
  if [ "$got" = "$(cat "${cmd%.cmd}.out")" ]; then
    echo "PASS packages.docs:$(basename "$cmd" .cmd) (\$ $(cat "$cmd") prints what docs/install.md shows)"
  else
    echo "FAIL packages.docs:$(basename "$cmd" .cmd): \$ $(cat "$cmd") printed: $(tr '\n' '|' <<<"$got") docs/install.md shows: $(tr '\n' '|' <"${cmd%.cmd}.out")"
    rc=1
  fi
done

# --- the glibc symbol check: what justifies the manylinux tag -------------------
# refused: fails naming the library's flaw, exactly
refused() { # NAME WANT CMD...
  local name=$1 want=$2 got
  shift 2
  if got=$("$@" 2>&1); then
    echo "FAIL packages.dist:$name: accepted: $got"
    rc=1
  elif [ "$got" = "$want" ]; then
    echo "PASS packages.dist:$name ($want)"
  else
    echo "FAIL packages.dist:$name: got '$got', want '$want'"
    rc=1
  fi
}
printf '#include <sys/random.h>\nint f(void *b) { return (int)getrandom(b, 8, 0); }\n' >"$tmp/newer.c"
printf '#include <sqlite3.h>\nconst char *f(void) { return sqlite3_libversion(); }\n' >"$tmp/linked.c"
if cc -shared -fPIC -o "$tmp/newer.so" "$tmp/newer.c" 2>/dev/null; then
  refused glibc-newer "check-lib: $tmp/newer.so needs getrandom@GLIBC_2.25, newer than glibc 2.17 (the manylinux_2_17 tag allows symbols up to GLIBC_2.17)" \
    bash bindings/check-lib.sh "$host" "$tmp/newer.so" 2.17
else
  echo "SKIP packages.dist:glibc-newer: this C library has no getrandom (glibc 2.25+) to build a library that needs it"
fi
if cc -shared -fPIC -o "$tmp/linked.so" "$tmp/linked.c" -lsqlite3 -Wl,--no-as-needed 2>/dev/null; then
  refused links-sqlite "check-lib: $tmp/linked.so needs libsqlite3.so.0; a wheel or platform package may need only libc.so.6 and libm.so.6" \
    bash bindings/check-lib.sh "$host" "$tmp/linked.so" 2.17
fi
if built "$other"; then
  refused other-machine "check-lib: $DIST/lib/$other/idempotency.so is built for '$(readelf -h "$DIST/lib/$other/idempotency.so" | sed -n 's/^ *Machine: *//p')', not $host ('$(readelf -h "$DIST/lib/$host/idempotency.so" | sed -n 's/^ *Machine: *//p')')" \
    bash bindings/check-lib.sh "$host" "$DIST/lib/$other/idempotency.so" 2.17
fi

# needs_only_libc PREFIX NAME SO: the installed extension needs nothing from
# the system but the C library.
needs_only_libc() {
  local deps bad
  deps=$(ldd "$3")
  bad=$(awk '$1 ~ /^(linux-vdso|libc|libm|libdl|libpthread|librt)\.so|^\/|ld-linux/ { next } { print }' <<<"$deps")
  if [ -z "$bad" ]; then
    echo "PASS $1.$2:self-contained (the installed extension needs only the C library)"
  else
    echo "FAIL $1.$2:self-contained: $3 needs $(tr '\n' ' ' <<<"$bad")"
    rc=1
  fi
}

# --- Python: the wheels as PyPI checks them, then installed ------------------------
if [[ " ${parts[*]} " == *" python "* ]]; then
  for p in "${platforms[@]}"; do
    whl=$DIST/sqlite_idempotency-$version-py3-none-$(wheel_tag "$p").whl
    if out=$("$PY" bindings/check-wheel.py "$whl" 2>&1); then
      echo "PASS packages.dist:wheel-$p ($out)"
    else
      echo "FAIL packages.dist:wheel-$p: $out"
      rc=1
    fi
    un=$tmp/unpacked-$p
    if out=$("$PY" -m wheel unpack -d "$un" "$whl" 2>&1); then
      files=$(cd "$un"/sqlite_idempotency-"$version" && find sqlite_idempotency -type f | sort | tr '\n' ' ')
      want_files=$( (cd bindings/python && ls sqlite_idempotency/*.py sqlite_idempotency/py.typed; echo sqlite_idempotency/words.json; echo sqlite_idempotency/serve.html; echo sqlite_idempotency/idempotency.so) | sort | tr '\n' ' ')
      if [ "$files" = "$want_files" ] &&
        cmp -s "$un/sqlite_idempotency-$version/sqlite_idempotency/idempotency.so" "$DIST/lib/$p/idempotency.so"; then
        echo "PASS packages.dist:wheel-$p-contents (python3 -m wheel unpack verifies RECORD; the API, py.typed, words.json, serve.html and the $p library)"
      else
        echo "FAIL packages.dist:wheel-$p-contents: the package holds '$files', or its idempotency.so is not lib/$p/idempotency.so"
        rc=1
      fi
    else
      echo "FAIL packages.dist:wheel-$p-contents: python3 -m wheel unpack: $out"
      rc=1
    fi
  done
  host_whl=$DIST/sqlite_idempotency-$version-py3-none-$(wheel_tag "$host").whl
  # a tampered file, and the platform tag PyPI refuses
  "$PY" - "$host_whl" "$tmp/tampered.whl" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as b:
    for i in a.infolist():
        data = a.read(i)
        if i.filename == "sqlite_idempotency/__init__.py":
            data += b"\n# changed after the wheel was built\n"
        b.writestr(i, data)
PY
  mkdir -p "$tmp/t"
  cp "$tmp/tampered.whl" "$tmp/t/$(basename "$host_whl")"
  out=$("$PY" bindings/check-wheel.py "$tmp/t/$(basename "$host_whl")" 2>&1)
  if [ $? -ne 0 ] && [[ "$out" =~ ^check-wheel:\ $(basename "$host_whl" | sed 's/\./\\./g'):\ RECORD\ says\ sqlite_idempotency/__init__\.py\ is\ sha256=[A-Za-z0-9_-]{43}\ \([0-9]+\ bytes\)\;\ it\ is\ sha256=[A-Za-z0-9_-]{43}\ \([0-9]+\ bytes\)$ ]]; then
    echo "PASS packages.dist:wheel-tampered (check-wheel.py refuses a file whose RECORD hash differs: $out)"
  else
    echo "FAIL packages.dist:wheel-tampered: $out"
    rc=1
  fi
  linux_whl=$tmp/t/sqlite_idempotency-$version-py3-none-linux_$(uname -m).whl
  cp "$host_whl" "$linux_whl"
  refused wheel-linux-tag "check-wheel: $(basename "$linux_whl"): platform tag linux_$(uname -m) is not one PyPI accepts for Linux (manylinux_X_Y_x86_64, manylinux_X_Y_aarch64, or the alias manylinux2014_ARCH)" \
    "$PY" bindings/check-wheel.py "$linux_whl"

  # the sdist: the package and the C sources, no library
  sdist=$DIST/sqlite_idempotency-$version.tar.gz
  got=$(tar tzf "$sdist" 2>/dev/null | grep -v '/$' | sed "s|^sqlite_idempotency-$version/||" | sort | tr '\n' ' ')
  want=$( (for f in LICENSE MANIFEST.in PKG-INFO README.md pyproject.toml setup.cfg setup.py \
      sqlite_idempotency/py.typed sqlite_idempotency/words.json sqlite_idempotency/serve.html csrc/include/idempotency.h \
      csrc/xxhash/xxhash.h csrc/xxhash/LICENSE sqlite_idempotency.egg-info/PKG-INFO \
      sqlite_idempotency.egg-info/SOURCES.txt sqlite_idempotency.egg-info/dependency_links.txt \
      sqlite_idempotency.egg-info/entry_points.txt \
      sqlite_idempotency.egg-info/top_level.txt; do echo "$f"; done
    (cd bindings/python && ls sqlite_idempotency/*.py)
    for f in ext/*.c ext/*.h; do echo "csrc/$f"; done) | sort | tr '\n' ' ')
  pkginfo=$(tar xzf "$sdist" -O "sqlite_idempotency-$version/PKG-INFO" 2>/dev/null)
  if [ "$got" = "$want" ] && grep -qx 'Name: sqlite-idempotency' <<<"$pkginfo" && grep -qx "Version: $version" <<<"$pkginfo"; then
    echo "PASS packages.dist:sdist ($(basename "$sdist"): the package, the extension's sources, xxhash.h and its licence; no library)"
  else
    echo "FAIL packages.dist:sdist: holds '$got', want '$want'; PKG-INFO: $(head -n 3 <<<"$pkginfo" | tr '\n' ' ')"
    rc=1
  fi

  # --- the wheel in a fresh virtual environment
  venv=$tmp/venv
  if ! out=$("$PY" -m venv "$venv" 2>&1 && "$venv/bin/pip" install --no-index --no-cache-dir -q "$host_whl" 2>&1); then
    printf '%s\n' "$out"
    echo "FAIL packages.python:install: python3 -m venv / pip install --no-index of $(basename "$host_whl") failed"
    rc=1
  else
    echo "PASS packages.python:install (pip install --no-index $(basename "$host_whl") into a fresh venv)"
    so=$("$venv/bin/python" -c 'import sqlite_idempotency as m; print(m.loadable_path() + ".so")')
    needs_only_libc packages python "$so"
    host_smoke+=("wheel|the $host wheel in the venv|${so%.so}")
    run_checked packages python "$venv/bin/python" tests/python/test_package_py.py
    run_checked adapters python "$venv/bin/python" tests/python/test_adapter_py.py
    got=$("$venv/bin/sqlite-idempotency" --version 2>&1)
    if [ "$got" = "sqlite-idempotency $version" ]; then
      echo "PASS packages.python:console-script (the wheel installs sqlite-idempotency)"
    else
      echo "FAIL packages.python:console-script: $venv/bin/sqlite-idempotency --version: $got"
      rc=1
    fi
    for ex in "$docs"/*.py; do
      [ -f "$ex" ] || continue
      if out=$("$venv/bin/python" "$ex" 2>&1) && [ "$out" = "$version" ]; then
        echo "PASS packages.docs:$(basename "$ex") (the Python example of docs/install.md prints $version)"
      else
        echo "FAIL packages.docs:$(basename "$ex"): the Python example of docs/install.md printed '$out', want '$version'"
        rc=1
      fi
    done
    if built "$other"; then
      other_whl=$DIST/sqlite_idempotency-$version-py3-none-$(wheel_tag "$other").whl
      refused wheel-other-platform "ERROR: $(basename "$other_whl") is not a supported wheel on this platform." \
        "$venv/bin/pip" install --no-index --no-cache-dir -q "$other_whl"
      plat_tag=$(wheel_tag "$other")
      if out=$("$venv/bin/pip" install --no-index --no-cache-dir -q --no-deps --only-binary=:all: \
        --platform "${plat_tag%%.*}" --target "$tmp/py-$other" "$other_whl" 2>&1) &&
        [ -f "$tmp/py-$other/sqlite_idempotency/idempotency.so" ]; then
        echo "PASS packages.python:install-$other (pip install --platform ${plat_tag%%.*} takes $(basename "$other_whl"))"
        other_smoke+=("wheel|the $other wheel pip installed for ${plat_tag%%.*}|$tmp/py-$other/sqlite_idempotency/idempotency")
      else
        echo "FAIL packages.python:install-$other: pip install --platform ${plat_tag%%.*} --target: $out"
        rc=1
      fi
    fi
  fi

  # --- the sdist, built from source by pip
  pywheels=/usr/share/python-wheels
  if ! ls "$pywheels"/setuptools-*.whl "$pywheels"/wheel-*.whl >/dev/null 2>&1; then
    echo "SKIP packages.python.sdist: $pywheels lacks setuptools or wheel, which pip's isolated build of the sdist installs (Debian: apt-get install python3-setuptools-whl python3-wheel-whl)"
  elif [ ! -x "$venv/bin/pip" ]; then
    echo "SKIP packages.python.sdist: no virtual environment (see packages.python:install)"
  else
    sdist_pip() { "$venv/bin/pip" install --no-index --no-cache-dir -q --find-links "$pywheels" "$@" "$sdist" 2>&1; }
    # CFLAGS=-O0: the build is tested here, not its speed
    if out=$(CFLAGS=-O0 sdist_pip --target "$tmp/py-sdist") &&
      lib=$(PYTHONPATH=$tmp/py-sdist "$PY" -c 'import sqlite_idempotency as m; print(m.loadable_path())') &&
      [ "$lib" = "$tmp/py-sdist/sqlite_idempotency/idempotency" ] && [ -f "$lib.so" ]; then
      echo "PASS packages.python.sdist:install (pip builds $(basename "$sdist") from source: $lib.so)"
      host_smoke+=("sdist|the sdist build|$lib")
      for ex in "$docs"/*.py; do
        [ -f "$ex" ] || continue
        if out=$(PYTHONPATH=$tmp/py-sdist "$PY" "$ex" 2>&1) && [ "$out" = "$version" ]; then
          echo "PASS packages.python.sdist:docs-$(basename "$ex") (the Python example of docs/install.md prints $version)"
        else
          echo "FAIL packages.python.sdist:docs-$(basename "$ex"): printed '$out', want '$version'"
          rc=1
        fi
      done
    else
      printf '%s\n' "$out"
      echo "FAIL packages.python.sdist:install: pip install of $(basename "$sdist") did not build sqlite_idempotency/idempotency.so ($lib)"
      rc=1
    fi
    # no SQLite headers: a compiler whose sysroot is empty finds none
    mkdir -p "$tmp/empty-sysroot"
    out=$(CC="cc --sysroot=$tmp/empty-sysroot" sdist_pip --target "$tmp/py-sdist-fail")
    want="setup.py: SQLite's headers (sqlite3ext.h, sqlite3.h) are not installed, and building sqlite-idempotency from source needs them (Debian/Ubuntu: apt-get install libsqlite3-dev; Fedora: dnf install sqlite-devel; Alpine: apk add sqlite-dev; macOS: brew install sqlite, then CFLAGS=-I\$(brew --prefix sqlite)/include), or install a binary wheel"
    if sed 's/^ *//' <<<"$out" | grep -qxF "$want" && [ ! -e "$tmp/py-sdist-fail/sqlite_idempotency" ]; then
      echo "PASS packages.python.sdist:no-headers (pip install stops with: $want)"
    else
      echo "FAIL packages.python.sdist:no-headers: pip printed: $(tr '\n' '|' <<<"$out")"
      rc=1
    fi
    # no C compiler: setup.py of the unpacked sdist, as pip runs it
    mkdir -p "$tmp/sdist-src"
    tar xzf "$sdist" -C "$tmp/sdist-src"
    out=$(cd "$tmp/sdist-src/sqlite_idempotency-$version" && CC="$tmp/no-such-cc" "$PY" setup.py -q build_ext 2>&1)
    want="setup.py: no C compiler: '$tmp/no-such-cc' is not installed. Building sqlite-idempotency from source needs a C compiler and SQLite's headers (Debian/Ubuntu: apt-get install gcc libsqlite3-dev; Fedora: dnf install gcc sqlite-devel; Alpine: apk add gcc musl-dev sqlite-dev; macOS: xcode-select --install), or install a binary wheel"
    if [ "$(tail -n 1 <<<"$out")" = "$want" ]; then
      echo "PASS packages.python.sdist:no-compiler (setup.py stops with: $want)"
    else
      echo "FAIL packages.python.sdist:no-compiler: got '$(tr '\n' '|' <<<"$out")', want '$want'"
      rc=1
    fi
  fi
fi

# --- Node: the packages in a fresh npm project ----------------------------------
if [[ " ${parts[*]} " == *" node "* ]]; then
  tgz=$DIST/sqlite-idempotency-$version.tgz
  files=$(tar tzf "$tgz" 2>/dev/null | sort | tr '\n' ' ')
  # the package.json's files list, and package.json itself
  want=$( (node -e 'for (const f of require("./bindings/node/package.json").files) console.log(f)'; echo package.json) | sed 's|^|package/|' | sort | tr '\n' ' ')
  optional=$(tar xzf "$tgz" -O package/package.json 2>/dev/null | node -e 'let t = ""; process.stdin.on("data", (d) => { t += d; }).on("end", () =>
    console.log(JSON.stringify(JSON.parse(t).optionalDependencies)))')
  want_optional="{\"sqlite-idempotency-linux-arm64\":\"$version\",\"sqlite-idempotency-linux-x64\":\"$version\"}"
  if [ "$files" = "$want" ] && [ "$optional" = "$want_optional" ]; then
    echo "PASS packages.dist:npm ($(basename "$tgz"): the API and its .d.ts, no library; optionalDependencies $optional)"
  else
    echo "FAIL packages.dist:npm: $(basename "$tgz") holds '$files', want '$want'; optionalDependencies $optional, want $want_optional"
    rc=1
  fi
  overrides=()
  for p in "${platforms[@]}"; do
    ptgz=$DIST/sqlite-idempotency-$p-$version.tgz
    overrides+=("\"sqlite-idempotency-$p\": \"file:$ptgz\"")
    files=$(tar tzf "$ptgz" 2>/dev/null | sort | tr '\n' ' ')
    manifest=$(tar xzf "$ptgz" -O package/package.json 2>/dev/null | node -e 'let t = ""; process.stdin.on("data", (d) => { t += d; }).on("end", () => {
      const m = JSON.parse(t); console.log(JSON.stringify([m.name, m.version, m.os, m.cpu, m.libc])); })')
    want_manifest="[\"sqlite-idempotency-$p\",\"$version\",[\"linux\"],[\"$(npm_cpu "$p")\"],[\"glibc\"]]"
    mkdir -p "$tmp/npm-$p-unpacked"
    tar xzf "$ptgz" -C "$tmp/npm-$p-unpacked"
    if [ "$files" = "package/LICENSE package/README.md package/idempotency.so package/package.json " ] &&
      [ "$manifest" = "$want_manifest" ] && cmp -s "$tmp/npm-$p-unpacked/package/idempotency.so" "$DIST/lib/$p/idempotency.so"; then
      echo "PASS packages.dist:npm-$p ($(basename "$ptgz"): lib/$p/idempotency.so alone; name, version, os, cpu, libc $manifest)"
    else
      echo "FAIL packages.dist:npm-$p: $(basename "$ptgz") holds '$files' (want LICENSE README.md idempotency.so package.json, the library lib/$p/idempotency.so); package.json $manifest, want $want_manifest"
      rc=1
    fi
  done
  bs3=$ROOT/tests/js/node_modules/better-sqlite3
  if [ ! -f "$bs3/package.json" ]; then
    (cd tests/js && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
      echo "   packages.node: npm ci in tests/js could not install better-sqlite3"
  fi
  # npm projects in which the optional dependencies resolve to the platform
  # tarballs, as they would from the registry: npm chooses by os and cpu
  new_project() {
    mkdir -p "$1"
    local IFS=,
    printf '{ "name": "idem-package-test", "version": "0.0.0", "private": true, "type": "module", "overrides": { %s } }\n' \
      "${overrides[*]}" >"$1/package.json"
  }
  npm_in() { local dir=$1; shift; (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$@" 2>&1); }
  project=$tmp/npm-project
  new_project "$project"
  npm_install() { npm_in "$project" "$@"; }
  drivers=()
  if [ ! -f "$bs3/package.json" ]; then
    echo "FAIL packages.node:install: better-sqlite3 is not installed in tests/js/node_modules"
    rc=1
    out=$(npm_install "$tgz") || { printf '%s\n' "$out"; echo "FAIL packages.node:install: npm install of $(basename "$tgz") failed"; rc=1; }
  elif ! out=$(npm_install "$tgz" "$bs3"); then
    printf '%s\n' "$out"
    echo "FAIL packages.node:install: npm install of $(basename "$tgz") and better-sqlite3 failed"
    rc=1
  else
    lp=$(cd "$project" && node -p 'require("sqlite-idempotency").getLoadablePath()')
    needs_only_libc packages node "$lp.so"
    host_smoke+=("npm|the sqlite-idempotency-$host npm package|$lp")
    v=$(cd "$project" && node -p 'require("better-sqlite3/package.json").version')
    case "$v" in
      12.*) echo "PASS packages.node:install (npm install $(basename "$tgz") into a fresh project, with better-sqlite3 $v)"
        drivers+=(better-sqlite3) ;;
      *) echo "FAIL packages.node:install: better-sqlite3 is '$v', not 12.x (run npm ci in tests/js)"; rc=1 ;;
    esac
  fi
  # npm installed the platform package of this machine and passed over the other
  if [ -f "$project/node_modules/sqlite-idempotency-$host/idempotency.so" ] && [ ! -e "$project/node_modules/sqlite-idempotency-$other" ]; then
    echo "PASS packages.node:platform-package (npm installed sqlite-idempotency-$host and passed over sqlite-idempotency-$other by os/cpu)"
  else
    echo "FAIL packages.node:platform-package: node_modules holds $(ls "$project/node_modules" 2>/dev/null | grep '^sqlite-idempotency' | tr '\n' ' ')"
    rc=1
  fi
  # the optional peers beside a framework's own pins: npm resolves the
  # package with Mastra 1 and with Mastra 0.24 (which pins ai@4), on this
  # Node (the registry's metadata; a registry out of reach is a SKIP)
  for fw in '@mastra/core@1' '@mastra/core@0.24'; do
    peer=$tmp/peer-${fw//[^a-z0-9]/-}
    new_project "$peer"
    if out=$(npm_in "$peer" --dry-run "$tgz" "$fw"); then
      echo "PASS packages.node:peers-$fw (npm install $(basename "$tgz") $fw resolves on Node $(node -v))"
    elif grep -q 'ERESOLVE' <<<"$out"; then
      echo "FAIL packages.node:peers-$fw: npm install $(basename "$tgz") $fw: $(grep -m3 -E 'peer|Found|ERESOLVE' <<<"$out" | tr '\n' ' ')"
      rc=1
    else
      echo "SKIP packages.node:peers-$fw: npm could not reach the registry ($(grep -m1 -E 'npm error' <<<"$out" | cut -c1-160))"
    fi
  done
  # npm for the other machine (a Docker image built here) takes the other package
  if built "$other"; then
    oproj=$tmp/npm-$other
    new_project "$oproj"
    if ! out=$(npm_in "$oproj" --os=linux --cpu="$(npm_cpu "$other")" "$tgz"); then
      echo "FAIL packages.node:install-$other: npm install --cpu=$(npm_cpu "$other"): $(tr '\n' ' ' <<<"$out")"
      rc=1
    elif [ -f "$oproj/node_modules/sqlite-idempotency-$other/idempotency.so" ] && [ ! -e "$oproj/node_modules/sqlite-idempotency-$host" ]; then
      echo "PASS packages.node:install-$other (npm install --os=linux --cpu=$(npm_cpu "$other") takes sqlite-idempotency-$other, not -$host)"
      other_smoke+=("npm|the sqlite-idempotency-$other npm package npm installed for --cpu=$(npm_cpu "$other")|$oproj/node_modules/sqlite-idempotency-$other/idempotency")
    else
      echo "FAIL packages.node:install-$other: npm install --cpu=$(npm_cpu "$other") installed $(ls "$oproj/node_modules" | tr '\n' ' ')"
      rc=1
    fi
  fi
  # getLoadablePath() when the platform package is missing, wrong, or for no platform
  omit=$tmp/npm-omit
  new_project "$omit"
  if out=$(npm_in "$omit" --omit=optional "$tgz"); then
    mkdir -p "$omit/tests/js"
    cp tests/js/checks.mjs tests/js/test_loadable_path.mjs "$omit/tests/js/"
    run_checked packages node.loadable-path bash -c 'cd "$1" && node tests/js/test_loadable_path.mjs "$2"' _ "$omit" "$DIST/lib/$host/idempotency.so"
  else
    echo "FAIL packages.node.loadable-path: npm install --omit=optional $(basename "$tgz"): $(tr '\n' ' ' <<<"$out")"
    rc=1
  fi
  # docs/install.md's install of a build of one's own, as written: both
  # tarballs into a project without overrides (a user's), better-sqlite3 12
  # from tests/js for better-sqlite3@12 (no network needed)
  doc_npm=$(grep -m 1 '^npm install ./build/dist/' docs/install.md)
  if [ "$host" != linux-x64 ]; then
    echo "SKIP packages.node:docs-install: docs/install.md installs the linux-x64 tarball, this machine is $host"
  elif [ -z "$doc_npm" ] || [[ "$doc_npm" != *" ./build/dist/sqlite-idempotency-linux-x64-$version.tgz "* ]]; then
    echo "FAIL packages.node:docs-install: docs/install.md has no npm install line of both tarballs (the main package and sqlite-idempotency-linux-x64): '$doc_npm'"
    rc=1
  else
    dproj=$tmp/npm-docs
    mkdir -p "$dproj"
    echo '{ "name": "idem-docs-install", "version": "0.0.0", "private": true }' >"$dproj/package.json"
    c=$(sed -e "s|\./build/dist/|$DIST/|g" -e "s|better-sqlite3@12|$bs3|" <<<"$doc_npm")
    if ! out=$(cd "$dproj" && bash -c "$c --ignore-scripts --no-audit --no-fund --loglevel=error" 2>&1); then
      echo "FAIL packages.node:docs-install: $doc_npm: $(tr '\n' ' ' <<<"$out")"
      rc=1
    elif got=$(cd "$dproj" && node -e 'const D = require("better-sqlite3"), db = new D(":memory:"); require("sqlite-idempotency").load(db);
        console.log(db.prepare("SELECT idem_version() AS v").get().v)' 2>&1) && [ "$got" = "$version" ]; then
      echo "PASS packages.node:docs-install ($doc_npm, as written: load(db) finds the library, idem_version() is $got)"
    else
      echo "FAIL packages.node:docs-install: after $doc_npm: $got"
      rc=1
    fi
  fi
  if out=$(npm_install "libsql@$LIBSQL_VERSION"); then
    drivers+=(libsql)
  elif [ "${CI:-}" = true ]; then
    printf '%s\n' "$out"
    echo "FAIL packages.node.libsql: npm install libsql@$LIBSQL_VERSION failed"
    rc=1
  else
    echo "SKIP packages.node.libsql: npm install libsql@$LIBSQL_VERSION failed (no network and not in npm's cache?): $(tail -n 1 <<<"$out")"
  fi
  server_py=""
  if [ -x "$PY" ]; then server_py=$PY; elif command -v python3 >/dev/null 2>&1; then server_py=$(command -v python3); fi
  # the test programs keep their place (tests/js) so that they import each
  # other as in the tree; sqlite-idempotency resolves from the project's
  # node_modules
  mkdir -p "$project/tests/js"
  cp tests/js/checks.mjs tests/js/test_package_node.mjs tests/js/idem_adapter.mjs tests/js/test_adapter_node.mjs "$project/tests/js/"
  for d in "${drivers[@]}"; do
    run_checked packages "node.$d" node "$project/tests/js/test_package_node.mjs" "$d"
    if [ -n "$server_py" ]; then
      run_checked adapters "node.$d" node "$project/tests/js/test_adapter_node.mjs" "$d" "$server_py" "$ROOT/tests/python/test_server.py"
    else
      echo "SKIP adapters.node.$d: no python3 to run the test server tests/python/test_server.py"
    fi
  done
  # TypeScript: the declarations accept a typed user and refuse misuse.
  if out=$(npm_install typescript@5); then
    cp tests/js/consumer_package.ts tests/js/misuse_package.ts "$project/"
    tsc() {
      printf '{ "compilerOptions": { "strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "lib": ["es2022", "dom"], "types": [] }, "files": ["%s"] }\n' "$1" >"$project/tsconfig.json"
      (cd "$project" && node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1)
    }
    if out=$(tsc consumer_package.ts); then
      echo "PASS packages.node:typescript-consumer (tsc --strict accepts tests/js/consumer_package.ts against index.d.ts)"
    else
      echo "FAIL packages.node:typescript-consumer: $(tr '\n' ' ' <<<"$out")"
      rc=1
    fi
    out=$(tsc misuse_package.ts)
    lines=$(grep -o '^misuse_package\.ts([0-9]*' <<<"$out" | cut -d'(' -f2 | sort -n -u | tr '\n' ' ')
    if [ "$lines" = "8 9 10 11 12 " ]; then
      echo "PASS packages.node:typescript-misuse (tsc refuses each misuse in tests/js/misuse_package.ts)"
    else
      echo "FAIL packages.node:typescript-misuse: errors on lines '$lines', want '8 9 10 11 12 ': $(tr '\n' ' ' <<<"$out")"
      rc=1
    fi
  elif [ "${CI:-}" = true ]; then
    printf '%s\n' "$out"
    echo "FAIL packages.node:typescript: npm install typescript@5 failed"
    rc=1
  else
    echo "SKIP packages.node:typescript: npm install typescript@5 failed (no network and not in npm's cache?): $(tail -n 1 <<<"$out")"
  fi

  out=$(node "$project/tests/js/test_package_node.mjs" node:sqlite 2>&1)
  if grep -q '^SKIP ' <<<"$out"; then
    printf '%s\n' "$out"
  else
    run_checked packages node.node-sqlite node "$project/tests/js/test_package_node.mjs" node:sqlite
  fi
  # node:sqlite on Node 24 and 22, and Bun's Database: the runtimes npm
  # ships (tests/lib/runtimes.sh), whatever the system's Node is
  # shellcheck source=tests/lib/runtimes.sh
  . tests/lib/runtimes.sh
  runtimes_ready
  for rt in "node24|$NODE24|node:sqlite|node@24" "node22|$NODE22|node:sqlite|node@22" "bun|$BUN|bun:sqlite|bun"; do
    IFS='|' read -r rname rbin rdriver rpkg <<<"$rt"
    if [ -z "$rbin" ]; then
      echo "SKIP packages.node.$rname: $rpkg could not be installed from npm into build/runtimes${runtimes_why:+ ($runtimes_why)}"
    else
      run_checked packages "node.$rname" sh -c "cd '$project' && exec '$rbin' tests/js/test_package_node.mjs $rdriver"
    fi
  done

  # the JavaScript examples of docs/install.md, in the project
  for ex in "$docs"/*.mjs; do
    [ -f "$ex" ] || continue
    cp "$ex" "$project/doc-$(basename "$ex")"
    if [[ " ${drivers[*]} " != *" better-sqlite3 "* ]]; then
      echo "SKIP packages.docs:$(basename "$ex"): better-sqlite3 is not installed in the project"
    elif out=$(cd "$project" && node "doc-$(basename "$ex")" 2>&1) && [ "$out" = "$version" ]; then
      echo "PASS packages.docs:$(basename "$ex") (the JavaScript example of docs/install.md prints $version)"
    else
      echo "FAIL packages.docs:$(basename "$ex"): the JavaScript example of docs/install.md printed '$out', want '$version'"
      rc=1
    fi
  done
fi

# --- the smoke test: load, claim, settle, replay, on each platform --------------
# tests/c/smoke.c dlopens a libsqlite3 of its own machine, so it builds
# with nothing but a C compiler; the other machine's build runs under qemu-user.
smoke_want="loaded: idem_version() $version
key: idem1-24871bd0060b2885a71b5ca5e0486b5c
claim: admitted 1
settle: succeeded
replay: replay 1 {\"message_id\":\"m-17\"}"
smoke() { # PLATFORM ID|LABEL|LIB RUNNER...
  local plat=$1 id label lib out
  IFS='|' read -r id label lib <<<"$2"
  shift 2
  rm -f "$tmp/smoke.db"
  if out=$("$@" "$lib" "$tmp/smoke.db" 2>&1) && [ "$out" = "$smoke_want" ]; then
    echo "PASS packages.$plat:smoke-$id ($label: load, claim, settle, replay: $(tail -n 1 <<<"$out"))"
  else
    echo "FAIL packages.$plat:smoke-$id: $label: got '$(tr '\n' '|' <<<"$out")', want '$(tr '\n' '|' <<<"$smoke_want")'"
    rc=1
  fi
}
if ! out=$(cc -std=gnu11 -Wall -Wextra -Werror -O1 -o "$tmp/smoke-$host" tests/c/smoke.c -ldl 2>&1); then
  echo "FAIL packages.$host:smoke: tests/c/smoke.c does not build: $out"
  rc=1
else
  host_sqlite=$(ldconfig -p 2>/dev/null | awk '$1 == "libsqlite3.so.0" { print $NF; exit }')
  for entry in "dist|make dist's $host library|$DIST/lib/$host/idempotency" "${host_smoke[@]}"; do
    smoke "$host" "$entry" "$tmp/smoke-$host" "${host_sqlite:-libsqlite3.so.0}"
  done
fi
if built "$other"; then
  qemu=$(command -v "qemu-$qarch" || command -v "qemu-$qarch-static" || true)
  osqlite=/usr/lib/$qarch-linux-gnu/libsqlite3.so.0
  # the other machine's C library: multiarch (libc6:$debarch) or the cross
  # compiler's sysroot (/usr/$qarch-linux-gnu)
  prefix=()
  if [ -e "/lib/$qloader" ] || [ -e "/usr/lib/$qarch-linux-gnu/$qloader" ]; then
    :
  elif [ -e "/usr/$qarch-linux-gnu/lib/$qloader" ]; then
    prefix=(-L "/usr/$qarch-linux-gnu")
  fi
  if [ -z "$qemu" ]; then
    echo "SKIP packages.$other:smoke: no qemu-$qarch to run the $other build (Debian: apt-get install qemu-user)"
  elif [ ! -e "$osqlite" ]; then
    echo "SKIP packages.$other:smoke: no $debarch libsqlite3 at $osqlite to run the $other build with (Debian: dpkg --add-architecture $debarch && apt-get update && apt-get install libc6:$debarch libsqlite3-0:$debarch)"
  elif [ ! -e "/lib/$qloader" ] && [ ! -e "/usr/lib/$qarch-linux-gnu/$qloader" ] && [ ${#prefix[@]} -eq 0 ]; then
    echo "SKIP packages.$other:smoke: no $debarch C library ($qloader) to run the $other build with (Debian: apt-get install libc6:$debarch)"
  elif ! out=$("$other_cc" -std=gnu11 -Wall -Wextra -Werror -O1 -o "$tmp/smoke-$other" tests/c/smoke.c -ldl 2>&1); then
    echo "FAIL packages.$other:smoke: tests/c/smoke.c does not cross-compile with $other_cc: $out"
    rc=1
  else
    for entry in "dist|make dist's $other library, under $(basename "$qemu")|$DIST/lib/$other/idempotency" "${other_smoke[@]}"; do
      smoke "$other" "$entry" "$qemu" "${prefix[@]}" "$tmp/smoke-$other" "$osqlite"
    done
  fi
fi

exit $rc
