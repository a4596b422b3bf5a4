#!/usr/bin/env bash
# Operating the ledger (docs/operating.md), from both packages as a user has
# them: a copy of bindings/python holding the built extension on PYTHONPATH,
# and a scratch npm project whose node_modules holds a copy of bindings/node
# (with its platform package, tests/lib/nodepkg.sh), better-sqlite3 12, prom-client and
# OpenTelemetry from tests/js/node_modules (npm ci there).
#
#   python / node   reconciliation against the counting target of
#                   tests/python/test_server.py, metrics and traces
#                   (tests/python/test_ops_py.py, tests/js/test_ops_node.mjs)
#   cli             the operator's command run by python -m sqlite_idempotency
#                   and by npx sqlite-idempotency on the same files (healthy,
#                   unknown rows, a dropped trigger, a dropped guard trigger,
#                   an altered shadow table, two ledgers, a missing file, a
#                   file that is not a database, usage errors): the same
#                   bytes on stdout and
#                   stderr and the same exit status, which is also checked
#   readonly        the reading subcommands open the file O_RDONLY (strace)
#   docs            every `$ ` command of docs/operating.md, run as written
#
# The packages carry the plain build; like 63-packages this runs in make test
# only.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP ops: runs in make test only: the packages carry the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi
plain_ext ops python node
rc=0
tmp=$(mktemp -d)
srv_pid=
trap '[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL ops.$1: $2"; rc=1; }
pass() { echo "PASS ops.$1"; }

# --- the packages as a user has them --------------------------------------------
mkdir -p "$tmp/py" "$tmp/proj/node_modules/.bin" "$tmp/scratch"
cp -r bindings/python/sqlite_idempotency "$tmp/py/"
cp bindings/node/words.json "$tmp/py/sqlite_idempotency/"
cp "$ext" "$tmp/py/sqlite_idempotency/idempotency.so"
have_py=0
if ! python_skip ops; then have_py=1; fi
have_node=0
NM=tests/js/node_modules
# node 20+ and better-sqlite3 12 in tests/js (npm ci there when absent;
# SKIP, saying why, when that cannot be done)
node_bsql ops node tests/js
if [ "$node_ready" != 1 ]; then
  :
elif [ ! -f "$NM/prom-client/package.json" ]; then
  fail node "$NM lacks prom-client (run npm ci in tests/js)"
else
  # shellcheck source=tests/lib/nodepkg.sh
  . tests/lib/nodepkg.sh
  stage_node_pkg "$tmp/proj/node_modules" "$ext"
  for d in "$NM"/* "$NM"/@*; do
    [ -e "$tmp/proj/node_modules/$(basename "$d")" ] || ln -s "$ROOT/$d" "$tmp/proj/node_modules/$(basename "$d")"
  done
  ln -s ../sqlite-idempotency/cli.js "$tmp/proj/node_modules/.bin/sqlite-idempotency"
  echo '{"name": "ops-scratch", "private": true}' >"$tmp/proj/package.json"
  if (cd "$tmp/proj" && node -e 'new (require("better-sqlite3"))(":memory:")') >/dev/null 2>&1; then
    have_node=1
  else
    echo "SKIP ops.node: better-sqlite3 in $NM does not load on node $(node --version)"
  fi
fi
export PYTHONPATH=$tmp/py
pycli() { "$PY" -m sqlite_idempotency "$@"; }
# what npx sqlite-idempotency runs (node_modules/.bin/sqlite-idempotency), without npx's start-up time
nodecli() { node "$tmp/proj/node_modules/.bin/sqlite-idempotency" "$@"; }

# --- reconciliation, metrics, traces -----------------------------------------------
coproc TARGET { exec "$PY" tests/python/test_server.py; }
srv_pid=$TARGET_PID
read -r -t 10 _ port <&"${TARGET[0]}" || port=
if [ -z "$port" ]; then
  fail target "the counting target (tests/python/test_server.py) did not start"
else
  [ "$have_py" = 1 ] && run_checked ops python "$PY" tests/python/test_ops_py.py "$tmp/scratch"
  [ "$have_node" = 1 ] && run_checked ops node sh -c "cd '$tmp/proj' && exec node '$ROOT/tests/js/test_ops_node.mjs' '$tmp/scratch' '$port'"
fi

# --- the command: Python and Node, byte for byte ------------------------------------
if [ "$have_py" = 1 ] && [ "$have_node" = 1 ]; then
  F=$tmp/fx
  mkdir -p "$F"
  keys=$("$PY" tests/python/make_fixtures.py "$F") || fail cli:fixtures "make_fixtures.py failed"
  key=$(sed -n 's/^KEY //p' <<<"$keys")
  key2=$(sed -n 's/^KEY2 //p' <<<"$keys")
  export SQLITE_IDEMPOTENCY_NOW_MS=1900000000000
  n=0
  # same EXPECTED-EXIT ARGS...: both commands, run in $F, give the same bytes and that exit status
  same() {
    local want=$1 pc nc
    shift
    (cd "$F" && pycli "$@") >"$tmp/p.out" 2>"$tmp/p.err"
    pc=$?
    (cd "$F" && nodecli "$@") >"$tmp/n.out" 2>"$tmp/n.err"
    nc=$?
    n=$((n + 1))
    if ! cmp -s "$tmp/p.out" "$tmp/n.out"; then
      fail "cli:same:$*" "stdout differs: $(diff "$tmp/p.out" "$tmp/n.out" | head -4 | tr '\n' ' ')"
    elif ! cmp -s "$tmp/p.err" "$tmp/n.err"; then
      fail "cli:same:$*" "stderr differs: $(diff "$tmp/p.err" "$tmp/n.err" | head -4 | tr '\n' ' ')"
    elif [ "$pc" != "$nc" ] || [ "$pc" != "$want" ]; then
      fail "cli:same:$*" "exit python $pc, node $nc, want $want ($(head -c 300 "$tmp/p.err"))"
    elif [ ! -s "$tmp/p.out" ] && [ ! -s "$tmp/p.err" ]; then
      fail "cli:same:$*" "printed nothing"
    else
      pass "cli:same:$* (exit $pc)"
    fi
  }
  for j in "" --json; do
    same 0 status healthy.db $j
    same 1 status one.db $j
    same 1 status unknown.db --ledger ledger $j
    same 1 status unknown.db --ledger quick $j
    same 2 status dropped.db $j
    same 2 status guard.db $j
    same 0 list one.db $j
    same 0 list healthy.db --status all $j
    same 0 list one.db --status unknown --tool charge_card --tenant acme $j
    same 0 list one.db --older-than 1h $j
    same 0 list one.db --status all --limit 2 $j
    same 2 list dropped.db --status all $j
    same 0 show one.db "$key" $j
    same 0 show one.db "$key" --tenant acme $j
    same 0 list one.db --status all --target card:acme/4242/order-9 $j
    same 0 list one.db --target nothing-here $j
    same 0 show one.db "$(cd "$F" && sqlite3 one.db "SELECT key FROM ledger_rows WHERE status = 'succeeded' AND tool = 'charge_card' AND tenant = 'acme' AND args LIKE '%retry%'")" $j
    same 2 show dropped.db "$(cd "$F" && sqlite3 dropped.db "SELECT key FROM ledger_rows WHERE status = 'unknown'")" $j
    same 0 check healthy.db $j
    same 1 check one.db $j
    same 2 check dropped.db $j
    same 2 check guard.db $j
  done
  for f in healthy.db one.db dropped.db guard.db; do same 0 metrics $f; done
  same 1 status unknown.db --ledger=quick
  same 2 status unknown.db
  same 2 status one.db --ledger nope
  same 2 status missing.db
  same 2 status notdb.db
  same 2 show one.db idem1-00000000000000000000000000000000
  same 64 status
  same 64 frob one.db
  same 64 list one.db --status maybe
  same 64 list one.db --limit 0
  same 64 list one.db --older-than 3weeks
  same 64 status one.db --tool x
  same 64 purge one.db
  same 64 metrics one.db --json
  same 64 resolve one.db "$key" done
  same 64 resolve one.db --all done
  same 64 resolve one.db "$key" failed --dry-run
  same 64 resolve one.db --all failed --dry-run=yes
  same 64 resolve one.db "$key" failed --all failed
  same 0 --help
  # the writing subcommands, each command on its own copy
  for c in p n; do cp "$F/one.db" "$F/w$c.db"; done
  resolve_both() {
    local want=$1 pc nc
    shift
    (cd "$F" && pycli "$1" wp.db "${@:2}") >"$tmp/p.out" 2>"$tmp/p.err"; pc=$?
    (cd "$F" && nodecli "$1" wn.db "${@:2}") >"$tmp/n.out" 2>"$tmp/n.err"; nc=$?
    sed -i 's/wn\.db/wp.db/g' "$tmp/n.out" "$tmp/n.err"
    # the two commands settle a moment apart: settled_at is the extension's
    # clock (a 13-digit time), the same shape in both
    sed -i -E 's/"settled_at":[0-9]{13}/"settled_at":T/' "$tmp/p.out" "$tmp/n.out"
    if cmp -s "$tmp/p.out" "$tmp/n.out" && cmp -s "$tmp/p.err" "$tmp/n.err" && [ "$pc" = "$want" ] && [ "$nc" = "$want" ]; then
      pass "cli:same:$* (exit $pc)"
    else
      fail "cli:same:$*" "python $pc $(cat "$tmp/p.out" "$tmp/p.err" | head -c 300) / node $nc $(cat "$tmp/n.out" "$tmp/n.err" | head -c 300)"
    fi
  }
  resolve_both 0 resolve "$key" succeeded --detail '{"charge":"ch-1"}'
  resolve_both 2 resolve "$key" failed
  resolve_both 2 resolve "$key2" released
  resolve_both 0 resolve "$key2" released --detail '{"sent":false}' --json
  got=$(cd "$F" && pycli resolve wp.db "$key" failed 2>&1)
  [ "$got" = "sqlite-idempotency: idem_resolve: illegal transition succeeded -> failed for key \"$key\"" ] &&
    pass cli:resolve-refused-message || fail cli:resolve-refused-message "got: $got"
  resolve_both 0 purge --older-than 0
  resolve_both 0 purge --older-than 7d --json
  # resolve --all, each command on a fresh copy: a dry run changes nothing;
  # a refusal of one row (released without {"sent": false}) resolves none;
  # the real run resolves the two unknown rows in one transaction
  for c in p n; do cp "$F/one.db" "$F/w$c.db"; done
  before=$(sha256sum "$F/wp.db" | cut -d' ' -f1)
  resolve_both 0 resolve --all failed --dry-run
  resolve_both 0 resolve --all failed --tool charge_card --tenant acme --dry-run --json
  resolve_both 0 resolve --all failed --older-than 1h --dry-run
  [ "$(sha256sum "$F/wp.db" | cut -d' ' -f1)" = "$before" ] && pass cli:resolve-all-dry-run-unchanged ||
    fail cli:resolve-all-dry-run-unchanged "the file changed"
  resolve_both 2 resolve --all released
  got=$(cd "$F" && pycli resolve wp.db --all released 2>&1)
  unknown_left=$(cd "$F" && sqlite3 wp.db "SELECT count(*) FROM ledger_rows WHERE status = 'unknown'")
  case $got in
    "sqlite-idempotency: idem_resolve: "*"(tenant acme, tool charge_card); nothing was resolved")
      [ "$unknown_left" = 2 ] && pass cli:resolve-all-refusal-resolves-none ||
        fail cli:resolve-all-refusal-resolves-none "$unknown_left unknown rows left, want 2" ;;
    *) fail cli:resolve-all-refusal-resolves-none "got: $got" ;;
  esac
  # progress: on a terminal (script gives the command a pty), "resolving I of N"
  # on stderr, cleared at the end; none in a pipe (resolve_both compares stderr, empty)
  for c in p n; do cp "$F/one.db" "$F/t$c.db"; done
  (cd "$F" && script -qec "$PY -m sqlite_idempotency resolve tp.db --all failed --dry-run" /dev/null) >"$tmp/tty.p" 2>&1
  (cd "$F" && script -qec "node $tmp/proj/node_modules/.bin/sqlite-idempotency resolve tn.db --all failed" /dev/null) >"$tmp/tty.n" 2>&1
  piped=$(cd "$F" && { pycli resolve tp.db --all failed --dry-run 2>&1 >/dev/null; nodecli resolve tp.db --all failed --dry-run 2>&1 >/dev/null; })
  if grep -q $'\rlisting 2 of 2\r\e\[K' "$tmp/tty.p" && grep -q $'\rresolving 2 of 2\r\e\[K' "$tmp/tty.n" && grep -q '^resolved 2 rows failed' "$tmp/tty.n" && [ -z "$piped" ]; then
    pass "cli:resolve-all-progress (a terminal shows listing/resolving I of N, cleared; a pipe shows none)"
  else
    fail cli:resolve-all-progress "python on a pty: $(cat -v "$tmp/tty.p" | head -c 300); node: $(cat -v "$tmp/tty.n" | head -c 300); in a pipe stderr: $piped"
  fi
  resolve_both 0 resolve --all failed --detail '{"checked":"by hand"}'
  resolve_both 0 resolve --all failed --json
  got=$(cd "$F" && sqlite3 wp.db "SELECT group_concat(tenant || ':' || status, ',') FROM (SELECT tenant, status FROM ledger_rows WHERE error = '{\"checked\":\"by hand\"}' ORDER BY id)")
  [ "$got" = "acme:failed,globex:failed" ] && pass cli:resolve-all-resolved || fail cli:resolve-all-resolved "got: $got"
  got=$(cd "$F" && pycli status missing.db 2>&1)
  [ "$got" = "sqlite-idempotency: no such file: missing.db" ] && pass cli:missing-message || fail cli:missing-message "got: $got"
  got=$(cd "$F" && pycli status notdb.db 2>&1)
  [ "$got" = "sqlite-idempotency: notdb.db is not a SQLite database (file is not a database)" ] &&
    pass cli:notdb-message || fail cli:notdb-message "got: $got"
  got=$(cd "$F" && pycli status unknown.db 2>&1)
  [ "$got" = "sqlite-idempotency: unknown.db has 2 ledgers (ledger, quick): choose one with --ledger NAME" ] &&
    pass cli:several-ledgers-message || fail cli:several-ledgers-message "got: $got"
  refused=$(cd "$F" && sqlite3 dropped.db ".load $ROOT/build/idempotency" "SELECT count(*) FROM ledger" 2>&1 | sed 's/^Error: [a-z ]*, idempotency: //')
  got=$(cd "$F" && pycli status dropped.db | sed -n 's/^problem: *//p')
  [ -n "$refused" ] && [ "$got" = "$refused" ] && pass cli:dropped-trigger-names-the-refusal ||
    fail cli:dropped-trigger-names-the-refusal "got: $got, the ledger says: $refused"
  fmt=$(cd "$F" && sqlite3 one.db "SELECT v FROM ledger_meta WHERE k = 'format'")
  got=$(cd "$F" && pycli metrics one.db | grep -v '^#')
  want="idempotency_ledger_up{ledger=\"ledger\"} 1
idempotency_ledger_format{ledger=\"ledger\"} $fmt
idempotency_ledger_open_claims{ledger=\"ledger\"} 1
idempotency_ledger_unknown{ledger=\"ledger\"} 2
idempotency_ledger_expired_claims{ledger=\"ledger\"} 0"
  [ "$(head -5 <<<"$got")" = "$want" ] && pass cli:metrics-values || fail cli:metrics-values "got: $got"
  # a format this build does not read
  cp "$F/healthy.db" "$F/future.db"
  sqlite3 "$F/future.db" "DROP TRIGGER ledger_meta_update; UPDATE ledger_meta SET v = 99 WHERE k = 'format'"
  same 2 check future.db
  got=$(cd "$F" && pycli check future.db | sed -n 's/^broken *ledger *//p')
  case "$got" in
    *"has format 99; this build reads format"*) pass cli:unknown-format-message ;;
    *) fail cli:unknown-format-message "got: $got" ;;
  esac
  # a shadow table altered (a column dropped): the ledger's problem is its
  # refusal, which names it
  cp "$F/healthy.db" "$F/altered.db"
  sqlite3 "$F/altered.db" "ALTER TABLE ledger_rows DROP COLUMN members"
  for j in "" --json; do
    same 2 check altered.db $j
    same 2 status altered.db $j
  done
  got=$(cd "$F" && pycli check altered.db | sed -n 's/^broken *ledger *//p')
  want="ledger ledger has its shadow table ledger_rows altered: it is not as the extension made it, and the ledger's statements no longer prepare on it; see what differs with SELECT idem_health('ledger'), then restore the table from a backup (a dropped column's data is gone; a renamed column can be renamed back); every operation on it is refused until then"
  [ "$got" = "$want" ] && pass cli:altered-table-message || fail cli:altered-table-message "got: $got"
  got=$(cd "$F" && nodecli status altered.db --json | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.stringify(JSON.parse(s).tables)))')
  want='[{"name":"ledger_rows","state":"altered"},{"name":"ledger_meta","state":"ok"},{"name":"ledger_guards","state":"ok"},{"name":"ledger_members","state":"ok"},{"name":"ledger_targets","state":"ok"}]'
  [ "$got" = "$want" ] && pass cli:altered-table-json || fail cli:altered-table-json "got: $got"
  echo "   ops.cli: $n comparisons"

  # --- read-only opens ------------------------------------------------------------
  if ! command -v strace >/dev/null 2>&1; then
    echo "SKIP ops.readonly: strace is not installed (Debian: apt-get install strace)"
  else
    for who in python node; do
      for c in status list "show one.db $key" check metrics; do
        set -- $c
        [ "$#" = 1 ] && set -- "$1" one.db
        if [ $who = python ]; then
          (cd "$F" && strace -f -qq -e trace=openat -o "$tmp/trace" "$PY" -m sqlite_idempotency "$@" >/dev/null 2>&1)
        else
          (cd "$F" && strace -f -qq -e trace=openat -o "$tmp/trace" node "$tmp/proj/node_modules/sqlite-idempotency/cli.js" "$@" >/dev/null 2>&1)
        fi
        opens=$(grep -F "/one.db\"" "$tmp/trace")
        if [ -z "$opens" ]; then
          fail "readonly:$who:$1" "strace saw no open of one.db"
        elif grep -q 'O_RDWR\|O_WRONLY\|O_CREAT' <<<"$opens"; then
          fail "readonly:$who:$1" "opened for writing: $(head -1 <<<"$opens")"
        else
          pass "readonly:$who:$1"
        fi
      done
    done
  fi

  # --- the packaging entries --------------------------------------------------------
  got=$(cd "$tmp/proj" && npx --no-install sqlite-idempotency --version)
  [ "$got" = "sqlite-idempotency $(node -p 'require("./bindings/node/package.json").version')" ] &&
    pass cli:npx-bin || fail cli:npx-bin "npx sqlite-idempotency --version: $got"
  got=$("$PY" -c 'import tomllib; print(tomllib.load(open("bindings/python/pyproject.toml", "rb"))["project"]["scripts"]["sqlite-idempotency"])' 2>&1)
  if [ "$got" = "sqlite_idempotency.cli:console" ] && "$PY" -c 'import sqlite_idempotency.cli as c; assert callable(c.console)'; then
    pass cli:console-script
  else
    fail cli:console-script "pyproject.toml [project.scripts] sqlite-idempotency: $got"
  fi

  # --- docs/operating.md, every $ command as written --------------------------------
  run_checked ops docs "$PY" tests/python/ops_docs.py docs/operating.md "$tmp/docs" "$tmp/proj"
fi

exit $rc
