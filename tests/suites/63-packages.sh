#!/usr/bin/env bash
# The language packages as a user installs them (bindings/, `make dist`):
#
#   dist     make dist builds a py3-none-<platform> wheel and an npm tarball,
#            each carrying the extension (and libcjson, when it links it),
#            which needs nothing else from the system but the C library
#   python   the wheel installed with pip --no-index into a fresh virtual
#            environment (Debian's /usr/bin/python3 -m venv): the package
#            tests (tests/packages/test_package_py.py) and the HTTP adapter
#            example over it against the counting target (tests/adapters/)
#   node     the tarball installed into a fresh npm project in a temporary
#            directory, beside better-sqlite3 12 (linked from
#            tests/bindings/node_modules, where the binding suite installs
#            it, so that it is not compiled again) and libsql (from the npm
#            registry or npm's cache): the package tests per driver, and the
#            HTTP adapter example per driver; node:sqlite where the running
#            Node has it; tsc (typescript 5 from npm) checks index.d.ts
#            against a typed user (tests/packages/consumer.ts) and misuse
#            it must refuse (tests/packages/misuse.ts)
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

# --- make dist ----------------------------------------------------------------
DIST=$tmp/dist
version=$(sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' include/idempotency.h)
if ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -s dist \
  BUILD="$tmp/build" DIST="$DIST" DIST_PARTS="${parts[*]}" 2>&1); then
  printf '%s\n' "$out"
  echo "FAIL packages.dist: make dist failed"
  exit 1
fi

# The libraries a package carries: the extension, and libcjson when it links it.
carried="idempotency.so"
if [ "$(uname -s)" = Linux ] && ldd "$DIST/lib/idempotency.so" | grep -q '^[[:space:]]*libcjson\.so'; then
  carried="idempotency.so libcjson.copyright libcjson.so.1"
fi

# needs_only_libc PREFIX NAME SO: the installed extension needs nothing from
# the system but the C library; what else it links resolves beside it.
needs_only_libc() {
  local deps bad
  if [ "$(uname -s)" != Linux ]; then
    echo "SKIP $1.$2:self-contained: ldd is Linux only"
    return
  fi
  deps=$(ldd "$3")
  bad=$(awk -v dir="$(dirname "$3")/" '$1 ~ /^(linux-vdso|libc|libm|libdl|libpthread|librt)\.so|^\/|ld-linux/ { next }
    $2 == "=>" && index($3, dir) == 1 { next } { print }' <<<"$deps")
  if [ -z "$bad" ]; then
    echo "PASS $1.$2:self-contained (the installed extension needs only the C library, or libraries beside it)"
  else
    echo "FAIL $1.$2:self-contained: $3 needs $(tr '\n' ' ' <<<"$bad")"
    rc=1
  fi
}

# --- Python: the wheel in a fresh virtual environment --------------------------
if [[ " ${parts[*]} " == *" python "* ]]; then
  plat=$("$PY" -c 'import sysconfig; print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))')
  whl=$DIST/sqlite_idempotency-$version-py3-none-$plat.whl
  if [ ! -f "$whl" ]; then
    echo "FAIL packages.dist:wheel: no $(basename "$whl") in make dist's output: $(ls "$DIST")"
    rc=1
  else
    names=$("$PY" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")
    tag=$("$PY" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.read(sys.argv[2]).decode())' \
      "$whl" "sqlite_idempotency-$version.dist-info/WHEEL")
    pkg_files=$(grep '^sqlite_idempotency/' <<<"$names" | sort | tr '\n' ' ')
    want_files=$(for f in __init__.py py.typed $carried; do echo "sqlite_idempotency/$f"; done | sort | tr '\n' ' ')
    if [ "$pkg_files" = "$want_files" ] &&
      grep -qx 'Root-Is-Purelib: false' <<<"$tag" && grep -qx "Tag: py3-none-$plat" <<<"$tag"; then
      echo "PASS packages.dist:wheel ($(basename "$whl"): the API, py.typed, $carried; platlib, not pure)"
    else
      echo "FAIL packages.dist:wheel: $(basename "$whl") holds '$pkg_files', want '$want_files'; WHEEL: $(tr '\n' ' ' <<<"$tag")"
      rc=1
    fi
    venv=$tmp/venv
    if ! out=$("$PY" -m venv "$venv" 2>&1 && "$venv/bin/pip" install --no-index --no-cache-dir -q "$whl" 2>&1); then
      printf '%s\n' "$out"
      echo "FAIL packages.python:install: python3 -m venv / pip install --no-index of the wheel failed"
      rc=1
    else
      echo "PASS packages.python:install (pip install --no-index $(basename "$whl") into a fresh venv)"
      so=$("$venv/bin/python" -c 'import sqlite_idempotency as m; print(m.loadable_path() + ".so")')
      needs_only_libc packages python "$so"
      run_checked packages python "$venv/bin/python" tests/packages/test_package_py.py
      run_checked adapters python "$venv/bin/python" tests/adapters/test_adapter_py.py
    fi
  fi
fi

# --- Node: the tarball in a fresh npm project -----------------------------------
if [[ " ${parts[*]} " == *" node "* ]]; then
  tgz=$DIST/sqlite-idempotency-$version.tgz
  nplat=$(node -p 'process.platform + "-" + process.arch')
  files=$(tar tzf "$tgz" 2>/dev/null | sort | tr '\n' ' ')
  want=$( (for f in LICENSE README.md index.d.ts index.js index.mjs package.json agent-tools.js agent-tools.d.ts \
    ai.js ai.mjs ai.d.ts openai-agents.js openai-agents.mjs openai-agents.d.ts langchain.js langchain.mjs langchain.d.ts; do echo "package/$f"; done
    for f in $carried; do echo "package/prebuilds/$nplat/$f"; done) | sort | tr '\n' ' ')
  if [ "$files" = "$want" ]; then
    echo "PASS packages.dist:npm ($(basename "$tgz"): the API, its .d.ts, $carried for $nplat)"
  else
    echo "FAIL packages.dist:npm: $(basename "$tgz") holds '$files', want '$want'"
    rc=1
  fi
  bs3=$ROOT/tests/bindings/node_modules/better-sqlite3
  if [ ! -f "$bs3/package.json" ]; then
    (cd tests/bindings && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
      echo "   packages.node: npm ci in tests/bindings could not install better-sqlite3"
  fi
  project=$tmp/npm-project
  mkdir -p "$project"
  printf '{ "name": "idem-package-test", "version": "0.0.0", "private": true, "type": "module" }\n' >"$project/package.json"
  npm_install() { (cd "$project" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$@" 2>&1); }
  drivers=()
  if [ ! -f "$bs3/package.json" ]; then
    echo "FAIL packages.node:install: better-sqlite3 is not installed in tests/bindings/node_modules"
    rc=1
    out=$(npm_install "$tgz") || { printf '%s\n' "$out"; echo "FAIL packages.node:install: npm install of $(basename "$tgz") failed"; rc=1; }
  elif ! out=$(npm_install "$tgz" "$bs3"); then
    printf '%s\n' "$out"
    echo "FAIL packages.node:install: npm install of $(basename "$tgz") and better-sqlite3 failed"
    rc=1
  else
    needs_only_libc packages node "$(cd "$project" && node -p 'require("sqlite-idempotency").getLoadablePath()').so"
    v=$(cd "$project" && node -p 'require("better-sqlite3/package.json").version')
    case "$v" in
      12.*) echo "PASS packages.node:install (npm install $(basename "$tgz") into a fresh project, with better-sqlite3 $v)"
        drivers+=(better-sqlite3) ;;
      *) echo "FAIL packages.node:install: better-sqlite3 is '$v', not 12.x (run npm ci in tests/bindings)"; rc=1 ;;
    esac
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
  # the test programs keep their places (tests/{lib,packages,adapters}) so
  # that they import each other as in the tree; sqlite-idempotency resolves
  # from the project's node_modules
  mkdir -p "$project/tests/lib" "$project/tests/packages" "$project/tests/adapters"
  cp tests/lib/checks.mjs "$project/tests/lib/"
  cp tests/packages/test_package_node.mjs "$project/tests/packages/"
  cp tests/adapters/idem_adapter.mjs tests/adapters/test_adapter_node.mjs "$project/tests/adapters/"
  for d in "${drivers[@]}"; do
    run_checked packages "node.$d" node "$project/tests/packages/test_package_node.mjs" "$d"
    if [ -n "$server_py" ]; then
      run_checked adapters "node.$d" node "$project/tests/adapters/test_adapter_node.mjs" "$d" "$server_py" "$ROOT/tests/adapters/test_server.py"
    else
      echo "SKIP adapters.node.$d: no python3 to run the test server tests/adapters/test_server.py"
    fi
  done
  # TypeScript: the declarations accept a typed user and refuse misuse.
  if out=$(npm_install typescript@5); then
    cp tests/packages/consumer.ts tests/packages/misuse.ts "$project/"
    tsc() {
      printf '{ "compilerOptions": { "strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "lib": ["es2022", "dom"], "types": [] }, "files": ["%s"] }\n' "$1" >"$project/tsconfig.json"
      (cd "$project" && node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1)
    }
    if out=$(tsc consumer.ts); then
      echo "PASS packages.node:typescript-consumer (tsc --strict accepts tests/packages/consumer.ts against index.d.ts)"
    else
      echo "FAIL packages.node:typescript-consumer: $(tr '\n' ' ' <<<"$out")"
      rc=1
    fi
    out=$(tsc misuse.ts)
    lines=$(grep -o '^misuse\.ts([0-9]*' <<<"$out" | cut -d'(' -f2 | sort -n -u | tr '\n' ' ')
    if [ "$lines" = "8 9 10 11 " ]; then
      echo "PASS packages.node:typescript-misuse (tsc refuses each misuse in tests/packages/misuse.ts)"
    else
      echo "FAIL packages.node:typescript-misuse: errors on lines '$lines', want '8 9 10 11 ': $(tr '\n' ' ' <<<"$out")"
      rc=1
    fi
  elif [ "${CI:-}" = true ]; then
    printf '%s\n' "$out"
    echo "FAIL packages.node:typescript: npm install typescript@5 failed"
    rc=1
  else
    echo "SKIP packages.node:typescript: npm install typescript@5 failed (no network and not in npm's cache?): $(tail -n 1 <<<"$out")"
  fi

  out=$(node "$project/tests/packages/test_package_node.mjs" node:sqlite 2>&1)
  if grep -q '^SKIP ' <<<"$out"; then
    printf '%s\n' "$out"
  else
    run_checked packages node.node-sqlite node "$project/tests/packages/test_package_node.mjs" node:sqlite
  fi
fi

exit $rc
