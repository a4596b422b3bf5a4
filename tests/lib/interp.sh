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

# Probes of the optional runtimes. Each prints the SKIP line and returns 0
# when the runtime is absent or unusable, saying why; returns 1 when it can
# run the tests. A probe runs what the tests need (import, open a database,
# enable extension loading) in a child whose exit status is its answer:
# "echo 'package require sqlite3' | tclsh" exits 0 even when the package is
# missing, because tclsh reading commands from a pipe reports an error and
# goes on.

# first_line TEXT / last_line TEXT: one non-empty line, for a SKIP reason
# (Perl's "Can't locate" without its @INC list; Python's exception, not
# its "Traceback" header).
first_line() { sed -n '/./{s/ (@INC contains.*//;p;q;}' <<<"$1"; }
last_line() { sed -n '/./h;${x;p;}' <<<"$1"; }

# python_skip PREFIX: Debian's /usr/bin/python3 (the pyenv python3 first on
# PATH cannot load extensions).
PY=/usr/bin/python3
python_skip() {
  local out
  if [ ! -x "$PY" ]; then
    echo "SKIP $1.python: $PY is not installed (Debian: apt-get install python3)"
  elif ! out=$("$PY" -c 'import sqlite3' 2>&1); then
    echo "SKIP $1.python: $PY cannot import sqlite3 ($(last_line "$out"))"
  elif ! out=$("$PY" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension(True)' 2>&1); then
    echo "SKIP $1.python: $PY's sqlite3 module cannot enable extension loading ($(last_line "$out"))"
  else
    return 1
  fi
  return 0
}

# tcl_skip PREFIX: tclsh with Tcl's sqlite3 package (libsqlite3-tcl).
tcl_skip() {
  local out
  if ! command -v tclsh >/dev/null 2>&1; then
    echo "SKIP $1.tcl: tclsh is not installed (Debian: apt-get install tcl libsqlite3-tcl)"
    return 0
  fi
  out=$(tclsh 2>&1 <<'TCL'
if {[catch {package require sqlite3} e]} { puts $e; exit 3 }
if {[catch {sqlite3 db :memory:; db enable_load_extension 1; db close} e]} { puts $e; exit 4 }
exit 0
TCL
  )
  case $? in
    0) return 1 ;;
    3) echo "SKIP $1.tcl: Tcl's sqlite3 package is not installed ($(first_line "$out"); Debian: apt-get install libsqlite3-tcl)" ;;
    4) echo "SKIP $1.tcl: Tcl's sqlite3 package cannot enable extension loading ($(first_line "$out"))" ;;
    *) echo "SKIP $1.tcl: tclsh could not run the probe ($(first_line "$out"))" ;;
  esac
  return 0
}

# perl_skip PREFIX: perl with DBI, DBD::SQLite (libdbd-sqlite3-perl) and
# JSON::PP.
perl_skip() {
  local out
  if ! command -v perl >/dev/null 2>&1; then
    echo "SKIP $1.perl: perl is not installed"
  elif ! out=$(perl -MDBI -MDBD::SQLite -MJSON::PP -e 1 2>&1); then
    echo "SKIP $1.perl: DBI, DBD::SQLite or JSON::PP is not installed ($(first_line "$out"); Debian: apt-get install libdbd-sqlite3-perl)"
  elif ! out=$(perl -MDBI -e 'my $d = DBI->connect("dbi:SQLite:dbname=:memory:", "", "", {RaiseError => 1, PrintError => 0}); $d->sqlite_enable_load_extension(1) or die "sqlite_enable_load_extension failed\n"' 2>&1); then
    echo "SKIP $1.perl: DBD::SQLite cannot enable extension loading ($(first_line "$out"))"
  else
    return 1
  fi
  return 0
}

# node_bsql PREFIX NAME DIR: node 20+ with better-sqlite3 12 in
# DIR/node_modules (installed with npm ci when absent). Sets node_ready=1
# when usable; prints SKIP (runtime absent, npm ci could not install the
# modules, e.g. offline, or the module does not load under this node) or
# FAIL (an installed better-sqlite3 that is not 12.x: sets rc=1).
node_bsql() {
  local prefix=$1 name=$2 dir=$3 out v
  node_ready=0
  if ! command -v node >/dev/null 2>&1; then
    echo "SKIP $prefix.$name: node is not installed"
    return
  elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
    echo "SKIP $prefix.$name: node $(node --version) is older than better-sqlite3 12 supports (20+)"
    return
  elif [ ! -f "$dir/node_modules/better-sqlite3/package.json" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "SKIP $prefix.$name: npm is not installed (needed to install better-sqlite3 in $dir)"
      return
    elif ! out=$(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error 2>&1); then
      echo "SKIP $prefix.$name: $dir/node_modules is absent and npm ci could not install it ($(last_line "$out"))"
      return
    fi
  fi
  v=$(cd "$dir" && node -p 'require("better-sqlite3/package.json").version' 2>/dev/null)
  case "$v" in
    12.*) ;;
    *)
      echo "FAIL $prefix.$name: $dir/node_modules has better-sqlite3 '${v}', not 12.x (run npm ci in $dir)"
      rc=1
      return
      ;;
  esac
  # the native module must load under this node (built for its ABI)
  if ! out=$(cd "$dir" && node -e 'const D = require("better-sqlite3"); const db = new D(":memory:"); if (typeof db.loadExtension !== "function") throw new Error("no loadExtension"); db.close();' 2>&1); then
    echo "SKIP $prefix.$name: better-sqlite3 $v in $dir does not load under node $(node --version) ($( (grep -m1 -E 'Error|error' <<<"$out" || first_line "$out") | sed 's/\. Tried:.*//; s/ Tried:.*//'); run npm ci in $dir)"
    return
  fi
  node_ready=1
}
