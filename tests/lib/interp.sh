# tests/lib/interp.sh: shared by the suites that run the extension in other
# interpreters (50-bindings.sh, 63-packages.sh). Sourced; sets globals.

# plain_ext PREFIX NAME...: sets $ext to the extension those interpreters
# can load. $EXT under build/asan (make sanitize) is an ASan build that an
# uninstrumented interpreter cannot load: build/idempotency.so is used
# instead when it exists, else every NAME skips and the suite exits 0.
# A missing extension is a FAIL (exit 1).
plain_ext() {
  local prefix=$1 n
  shift
  ext=${EXT:-${BUILD:-build}/idempotency.so}
  case "$ext" in
    *build/asan/*)
      if [ -f build/idempotency.so ]; then
        echo "   $prefix: \$EXT=$ext is a sanitizer build the interpreters cannot load; using build/idempotency.so"
        ext=build/idempotency.so
      else
        for n in "$@"; do
          echo "SKIP $prefix.$n: \$EXT=$ext is a sanitizer build that an uninstrumented interpreter cannot load, and build/idempotency.so is absent (run make)"
        done
        exit 0
      fi
      ;;
  esac
  if [ ! -f "$ext" ]; then
    echo "FAIL $prefix: the extension $ext is not built (run make)"
    exit 1
  fi
}

# run_checked PREFIX NAME CMD...: runs one test program, shows its lines,
# and turns a crash (non-zero exit without a FAIL line) or a run with no
# check into a FAIL; sets rc=1 on failure.
run_checked() {
  local prefix=$1 name=$2 out status
  shift 2
  out=$(timeout 120 "$@" 2>&1)
  status=$?
  printf '%s\n' "$out"
  if [ "$status" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    echo "FAIL $prefix.$name: the test exited with status $status"
  elif ! grep -q '^PASS ' <<<"$out" && ! grep -q '^FAIL ' <<<"$out"; then
    echo "FAIL $prefix.$name: the test ran no check"
    status=1
  fi
  [ "$status" -eq 0 ] || rc=1
}

# python_skip PREFIX: prints the SKIP line and returns 0 when Debian's
# /usr/bin/python3 (the pyenv python3 first on PATH cannot load
# extensions) is absent or cannot load extensions; returns 1 when usable.
PY=/usr/bin/python3
python_skip() {
  if [ ! -x "$PY" ]; then
    echo "SKIP $1.python: $PY is not installed (Debian: apt-get install python3)"
  elif ! "$PY" -c 'import sqlite3, sys; sys.exit(0 if hasattr(sqlite3.connect(":memory:"), "enable_load_extension") else 1)' 2>/dev/null; then
    echo "SKIP $1.python: $PY's sqlite3 module lacks enable_load_extension"
  else
    return 1
  fi
  return 0
}
