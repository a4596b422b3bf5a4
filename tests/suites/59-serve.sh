#!/usr/bin/env bash
# The operator's page (docs/operating.md, "The page"): `sqlite-idempotency
# serve FILE` from both packages as a user has them (as in 57-ops.sh), on
# the fixtures of tests/python/make_fixtures.py.
#
#   refusals   serve's usage errors, the same bytes and exit status from
#              both commands: --host without --token, a bad --token or
#              --port, --json, a missing file
#   http       each server: the first line on stdout is its URL; /api/status,
#              /api/list and /api/show answer the command's --json output
#              byte for byte (the same from both servers); the page is
#              serve.html byte for byte with a Content-Security-Policy that
#              loads nothing from elsewhere; POST is refused (405), an unknown
#              path (404) or parameter (400), a foreign Host header (421);
#              with --token, a request without it (401); SIGINT stops it
#              with status 0
#   readonly   the file is byte-identical after everything the page and the
#              endpoints did
#   docs       docs/operating.md's serve example, run as written (both)
#   browser    tests/js/test_serve_browser.mjs: Debian's chromium, headless,
#              through puppeteer-core (tests/js/node_modules); SKIP, saying
#              why, where either is absent. SHOTS=DIR saves its screenshots
#              there (make screenshots: docs/images).
#
# The packages carry the plain build; like 57-ops this runs in make test only.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP serve: runs in make test only: the packages carry the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi
plain_ext serve refusals http readonly browser
rc=0
tmp=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL serve.$1: $2"; rc=1; }
pass() { echo "PASS serve.$1"; }

# --- the packages as a user has them ------------------------------------------
mkdir -p "$tmp/py" "$tmp/proj/node_modules/.bin" "$tmp/fx"
cp -r bindings/python/sqlite_idempotency "$tmp/py/"
cp bindings/node/words.json bindings/node/serve.html "$tmp/py/sqlite_idempotency/"
cp "$ext" "$tmp/py/sqlite_idempotency/idempotency.so"
if python_skip serve; then exit 0; fi
NM=tests/js/node_modules
node_bsql serve node tests/js
[ "$node_ready" = 1 ] || exit "$rc"
# shellcheck source=tests/lib/nodepkg.sh
. tests/lib/nodepkg.sh
stage_node_pkg "$tmp/proj/node_modules" "$ext"
for d in "$NM"/* "$NM"/@*; do
  [ -e "$tmp/proj/node_modules/$(basename "$d")" ] || ln -s "$ROOT/$d" "$tmp/proj/node_modules/$(basename "$d")"
done
echo '{"name": "serve-scratch", "private": true}' >"$tmp/proj/package.json"
export PYTHONPATH=$tmp/py
pycli() { "$PY" -m sqlite_idempotency "$@"; }
nodecli() { node "$tmp/proj/node_modules/sqlite-idempotency/cli.js" "$@"; }
F=$tmp/fx
keys=$("$PY" tests/python/make_fixtures.py "$F") || { fail fixtures "make_fixtures.py failed"; exit 1; }
key=$(sed -n 's/^KEY //p' <<<"$keys")
key2=$(sed -n 's/^KEY2 //p' <<<"$keys")
before=$(sha256sum "$F/one.db" "$F/unknown.db")

# --- refusals: the same bytes and status from both ------------------------------
n=0
refuse() { # WANT-STATUS WANT-STDERR ARGS...
  local want=$1 msg=$2 pc nc
  shift 2
  (cd "$F" && timeout 10 "$PY" -m sqlite_idempotency "$@") >"$tmp/p.out" 2>"$tmp/p.err"
  pc=$?
  (cd "$F" && timeout 10 node "$tmp/proj/node_modules/sqlite-idempotency/cli.js" "$@") >"$tmp/n.out" 2>"$tmp/n.err"
  nc=$?
  n=$((n + 1))
  if [ "$pc" != "$want" ] || [ "$nc" != "$want" ] || [ "$(cat "$tmp/p.err")" != "$msg" ] || ! cmp -s "$tmp/p.err" "$tmp/n.err" || [ -s "$tmp/p.out" ] || [ -s "$tmp/n.out" ]; then
    fail "refusals:$n" "serve $*: python exit $pc, node exit $nc (want $want); python said $(head -c 300 "$tmp/p.err"), node said $(head -c 300 "$tmp/n.err"); want $msg"
  else
    pass "refusals:$n (serve $*: exit $want, $msg)"
  fi
}
refuse 64 "sqlite-idempotency: serve --host 0.0.0.0 needs --token T: the page shows every call's arguments and results to whoever reaches the port, so another address than 127.0.0.1 requires a bearer token" serve one.db --host 0.0.0.0
refuse 64 "sqlite-idempotency: --token must be 16 to 256 printable ASCII characters without spaces, got 5 characters" serve one.db --host 0.0.0.0 --token short
refuse 64 'sqlite-idempotency: --port must be an integer from 0 to 65535 (0: any free port), got "70000"' serve one.db --port 70000
refuse 64 "sqlite-idempotency: serve answers JSON on its own endpoints; --json does not apply" serve one.db --json
refuse 2 "sqlite-idempotency: no such file: missing.db" serve missing.db --port 0

# --- the servers ------------------------------------------------------------------
# the command's clock for ages (status's age_seconds, --older-than), as in
# 57-ops: the endpoints and the command read the same "now"
export SQLITE_IDEMPOTENCY_NOW_MS=1900000000000
# start NAME ARGS...: a server in the background; its URL in url_NAME
start() {
  local name=$1 i
  shift
  (cd "$F" && exec "$@") >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  eval "pid_$name=$!"
  for i in $(seq 100); do
    [ -s "$tmp/$name.out" ] && break
    sleep 0.1
  done
  eval "url_$name=\$(head -1 \"\$tmp/\$name.out\")"
}
start py "$PY" -m sqlite_idempotency serve one.db --port 0
start node node "$tmp/proj/node_modules/sqlite-idempotency/cli.js" serve one.db --port 0
TOKEN=serve-test-token-0123456789
start tok node "$tmp/proj/node_modules/sqlite-idempotency/cli.js" serve unknown.db --ledger ledger --host 0.0.0.0 --port 0 --token "$TOKEN"
# shellcheck disable=SC2154
for u in "$url_py" "$url_node"; do
  if ! [[ "$u" =~ ^http://127\.0\.0\.1:[0-9]+/$ ]]; then fail http:url "a server's first line is '$u' (stderr: $(cat "$tmp/py.err" "$tmp/node.err" | head -c 300))"; fi
done
# shellcheck disable=SC2154
tok_port=${url_tok##*:}
tok_port=${tok_port%/}

# GET PATH from a server, into FILE: prints the HTTP status
get() { curl -s -o "$2" -w '%{http_code}' "${@:3}" "$1"; }
if [ "$rc" = 0 ]; then
  n=0
  # the endpoints answer the command's --json output, byte for byte
  for pair in "status|status one.db" "list?status=unknown|list one.db --status unknown" "list?status=all&text=b%40example.com|list one.db --status all --text b@example.com" \
    "show?key=$key|show one.db $key" "list?tool=charge_card&older-than=0&limit=2&status=all|list one.db --tool charge_card --older-than 0 --limit 2 --status all"; do
    path=${pair%%|*}
    read -ra cmd <<<"${pair#*|}"
    n=$((n + 1))
    (cd "$F" && pycli "${cmd[@]}" --json) >"$tmp/want.json" 2>/dev/null
    pc=$(get "${url_py}api/$path" "$tmp/py.json")
    nc=$(get "${url_node}api/$path" "$tmp/node.json")
    if [ "$pc" = 200 ] && [ "$nc" = 200 ] && cmp -s "$tmp/want.json" "$tmp/py.json" && cmp -s "$tmp/py.json" "$tmp/node.json" && [ -s "$tmp/want.json" ]; then
      pass "http:endpoint-$n (/api/$path is ${cmd[*]} --json, from both servers)"
    else
      fail "http:endpoint-$n" "/api/$path: python $pc, node $nc; $(diff "$tmp/want.json" "$tmp/py.json" | head -5 | tr '\n' ' ') $(diff "$tmp/py.json" "$tmp/node.json" | head -5 | tr '\n' ' ')"
    fi
  done
  # the page, byte for byte, and its policy
  for s in py node; do
    u=url_$s
    code=$(get "${!u}" "$tmp/page.html" -D "$tmp/page.h")
    if [ "$code" = 200 ] && cmp -s "$tmp/page.html" bindings/node/serve.html && grep -qi "^content-security-policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'" "$tmp/page.h" \
      && ! grep -Eq '(src|href)="(https?:)?//' bindings/node/serve.html && ! grep -q '@import\|url(' bindings/node/serve.html; then
      pass "http:page-$s (serve.html byte for byte, a policy that loads nothing from elsewhere, no outside reference in it)"
    else
      fail "http:page-$s" "status $code; $(head -c 300 "$tmp/page.h")"
    fi
  done
  # refusals, the same from both servers
  check_refusal() { # NAME WANT-STATUS WANT-BODY CURL-ARGS... (PATH appended to each URL)
    local name=$1 want=$2 body=$3 path=$4 s u code got port
    shift 4
    for s in py node; do
      u=url_$s
      port=${!u##*:}
      port=${port%/}
      code=$(get "${!u}$path" "$tmp/r.json" "$@")
      got=$(cat "$tmp/r.json")
      if [ "$code" = "$want" ] && [ "$got" = "${body//PORT/$port}" ]; then pass "http:$name-$s ($want $got)"; else fail "http:$name-$s" "$code $got; want $want ${body//PORT/$port}"; fi
    done
  }
  check_refusal post 405 '{"error":"serve is read-only: POST is not allowed (GET and HEAD are)"}' api/status -X POST
  check_refusal delete 405 '{"error":"serve is read-only: DELETE is not allowed (GET and HEAD are)"}' api/show -X DELETE
  check_refusal no-page 404 '{"error":"no such page: /api/resolve"}' 'api/resolve?key=x'
  check_refusal bad-param 400 '{"error":"/api/list takes status, tool, tenant, target, older-than, text, limit; got \"detail\""}' 'api/list?detail=x'
  check_refusal bad-value 400 '{"error":"sqlite-idempotency: --status must be one of open, all, claimed, unknown, succeeded, failed, released; got \"nope\"","exit_status":64}' 'api/list?status=nope'
  check_refusal no-key 422 '{"error":"sqlite-idempotency: ledger ledger has no key \"nokey\"","exit_status":2}' 'api/show?key=nokey'
  check_refusal host 421 '{"error":"serve answers only Host 127.0.0.1:PORT, localhost:PORT, [::1]:PORT; got \"attacker.example:80\""}' api/status -H 'Host: attacker.example:80'
  # the token
  code=$(get "http://127.0.0.1:$tok_port/api/status" "$tmp/t.json")
  code2=$(get "http://127.0.0.1:$tok_port/api/status" "$tmp/t2.json" -H "Authorization: Bearer $TOKEN")
  code3=$(get "http://127.0.0.1:$tok_port/api/status" "$tmp/t3.json" -H "Authorization: Bearer ${TOKEN}x")
  if [ "$code" = 401 ] && [ "$(cat "$tmp/t.json")" = '{"error":"serve needs its token: Authorization: Bearer T, or ?token=T on the page"}' ] && [ "$code2" = 200 ] && [ "$code3" = 401 ] && grep -q '"ledger": "ledger"' "$tmp/t2.json"; then
    pass "http:token (no token 401, the right one 200, another 401)"
  else
    fail http:token "without $code $(cat "$tmp/t.json"), with $code2, a wrong one $code3"
  fi
fi

# --- the browser -----------------------------------------------------------------
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIP serve.browser: chromium is not installed (apt-get install chromium; .ci/run installs it)"
elif [ ! -f "$NM/puppeteer-core/package.json" ]; then
  echo "SKIP serve.browser: puppeteer-core is not installed in $NM (npm ci there)"
elif [ "$rc" = 0 ]; then
  [ -n "${SHOTS:-}" ] && mkdir -p "$SHOTS" && SHOTS=$(cd "$SHOTS" && pwd)
  cp tests/js/test_serve_browser.mjs tests/js/checks.mjs "$tmp/proj/"
  # shellcheck disable=SC2154
  (cd "$tmp/proj" && SHOTS=${SHOTS:-} run_checked serve browser node test_serve_browser.mjs "$chromium" "$key" "$key2" "$url_py" "$url_node" --token "http://127.0.0.1:$tok_port/?token=$TOKEN"; exit "$rc") >"$tmp/browser.out" || rc=1
  grep -v '^RESOLVE ' "$tmp/browser.out"
  # the page's resolve command, as copied, run where the file is (a copy of it)
  cmd=$(sed -n 's/^RESOLVE //p' "$tmp/browser.out")
  mkdir -p "$tmp/copy/bin"
  cp "$F/one.db" "$tmp/copy/"
  printf '#!/bin/sh\nexec node %s "$@"\n' "$tmp/proj/node_modules/sqlite-idempotency/cli.js" >"$tmp/copy/bin/sqlite-idempotency"
  chmod +x "$tmp/copy/bin/sqlite-idempotency"
  if [ -z "$cmd" ]; then
    fail browser:copied-command "the browser test printed no RESOLVE line"
  elif out=$(cd "$tmp/copy" && PATH=$tmp/copy/bin:$PATH eval "$cmd" 2>&1) && (cd "$tmp/copy" && nodecli show one.db "$key" --json) | grep -q '"status": "succeeded"'; then
    pass "browser:copied-command ($cmd: $out)"
  else
    fail browser:copied-command "$cmd: $out"
  fi
fi

# --- docs/operating.md's serve example, as written ---------------------------------
# (ops_docs.py runs the other blocks; this one runs until stopped)
names=$("$PY" tests/python/doc_blocks.py --suite 59-serve docs/operating.md "$tmp/blocks" 2>&1)
if [ "$names" != 01.console ]; then
  fail docs "docs/operating.md must hold one console block marked for this suite (found: $names)"
else
  mkdir -p "$tmp/docs"
  sqlite3 "$tmp/docs/agent.db" <tests/fixtures/operating-docs.sql
  cmd=$(sed -n '1s/^\$ //p' "$tmp/blocks/01.console")
  want=$(tail -n +2 "$tmp/blocks/01.console")
  for who in python node; do
    if [ "$who" = python ]; then printf '#!/bin/sh\nexec %s -m sqlite_idempotency "$@"\n' "$PY" >"$tmp/docs/sqlite-idempotency"
    else printf '#!/bin/sh\nexec node %s "$@"\n' "$tmp/proj/node_modules/sqlite-idempotency/cli.js" >"$tmp/docs/sqlite-idempotency"; fi
    chmod +x "$tmp/docs/sqlite-idempotency"
    (cd "$tmp/docs" && PATH=$tmp/docs:$PATH exec bash -c "exec $cmd") >"$tmp/docs.out" 2>&1 &
    dpid=$!
    for i in $(seq 100); do [ "$(wc -l <"$tmp/docs.out")" -ge 2 ] && break; sleep 0.1; done
    kill -INT "$dpid" 2>/dev/null
    wait "$dpid"
    code=$?
    got=$(sed -E 's#^http://127\.0\.0\.1:[0-9]+/$#http://127.0.0.1:<port>/#' "$tmp/docs.out")
    if [ "$got" = "$want" ] && [ "$code" = 0 ]; then pass "docs:$who ($cmd, as docs/operating.md shows it, stopped by Ctrl-C with exit 0)"; else fail "docs:$who" "$cmd printed $(head -c 300 "$tmp/docs.out") and exited $code; the docs say $want"; fi
  done
fi

# --- stopping, and the file afterwards ---------------------------------------------
for s in py node tok; do
  p=pid_$s
  kill -INT "${!p}" 2>/dev/null
  code=
  for i in $(seq 50); do
    if ! kill -0 "${!p}" 2>/dev/null; then wait "${!p}"; code=$?; break; fi
    sleep 0.1
  done
  if [ "$code" = 0 ]; then pass "http:sigint-$s (Ctrl-C stops it, exit 0)"; else fail "http:sigint-$s" "after SIGINT the server ${code:+exited $code}${code:-still runs}; stderr $(head -c 300 "$tmp/$s.err")"; fi
done
after=$(sha256sum "$F/one.db" "$F/unknown.db")
if [ "$before" = "$after" ] && [ ! -e "$F/one.db-wal" ] && [ ! -e "$F/one.db-journal" ]; then
  pass "readonly (one.db and unknown.db byte-identical after the page, the endpoints and the refusals)"
else
  fail readonly "the files changed: $before / $after; $(ls "$F")"
fi
exit "$rc"
