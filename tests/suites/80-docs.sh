#!/usr/bin/env bash
# Every example of README.md and docs/*.md, run as a reader would paste it
# and its printed result compared (tests/python/run_docs.py; the rules are in
# docs/design.md, "How the docs' examples are run"): the sqlite3 shell
# transcripts in one session per page, the Python programs with Debian's
# /usr/bin/python3 and the package importable, the JavaScript programs with
# node, sqlite-idempotency and better-sqlite3 12 resolvable as packages,
# and the `$ command` blocks in a shell. One PASS line per page (how many
# blocks ran, how many were skipped as norun), a FAIL per failing block.
#
# The runner itself is Python: without /usr/bin/python3 the suite skips. A
# language whose runtime is absent skips its blocks, saying why. Like the
# other package suites it runs in make test only: under make sanitize and
# make valgrind the interpreters cannot load the instrumented build.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP docs: runs in make test only: the examples load the plain build with uninstrumented interpreters, which cannot load a sanitizer build and are not run under valgrind here"
  exit 0
fi
if [ ! -x "$PY" ]; then
  echo "SKIP docs: $PY is not installed (Debian: apt-get install python3); the runner is a Python program"
  exit 0
fi
rc=0
args=()
if python_skip docs >/dev/null; then
  args+=(--no-python "$(python_skip docs | sed 's/^SKIP docs.python: //')")
fi
node_bsql docs js tests/js >"${TMPDIR:-/tmp}/idem-docs-node.$$" 2>&1
node_out=$(cat "${TMPDIR:-/tmp}/idem-docs-node.$$"); rm -f "${TMPDIR:-/tmp}/idem-docs-node.$$"
if [ "$node_ready" != 1 ]; then
  case "$node_out" in
    FAIL*) printf '%s\n' "$node_out"; exit 1 ;;
  esac
  args+=(--no-js "$(sed -n 's/^SKIP docs.js: //p' <<<"$node_out" | head -n 1)")
fi

# The runner itself: a page whose printed result is wrong must fail, naming
# the page, the block's line and the difference; a norun block is counted.
page=$(mktemp "${TMPDIR:-/tmp}/idem-docs-self.XXXXXX.md")
trap 'rm -f "$page"' EXIT
cat >"$page" <<'MD'
# self-test

```sql
sqlite> .load build/idempotency
sqlite> SELECT idem_valid_key('a b');
1
```

<!-- norun -->
```sh
make install
```

```sql
sqlite> SELECT idem_check_key(NULL, 'tenant');
Runtime error: idem_check_key: tenant is missing (NULL) (19)
```
MD
out=$(EXT=${EXT:-build/idempotency.so} "$PY" tests/python/run_docs.py "$page" 2>&1)
label=$(basename "$page")
want_fail="FAIL docs.*$label:3: after \"SELECT idem_valid_key('a b');\": line 2 of the output differs:"
if [ "$(grep -c '^FAIL ' <<<"$out")" = 1 ] && grep -q "^$want_fail" <<<"$out" &&
  grep -q "docs: '1'" <<<"$out" && grep -q "actual: '0'" <<<"$out" && ! grep -q '^PASS ' <<<"$out"; then
  echo "PASS docs.runner:wrong-result-fails (the page, line 3, docs '1' against actual '0')"
else
  echo "FAIL docs.runner:wrong-result-fails: the runner printed: $(tr '\n' ' ' <<<"$out")"
  rc=1
fi
sed -i 's/^1$/0/' "$page"
out=$(EXT=${EXT:-build/idempotency.so} "$PY" tests/python/run_docs.py "$page" 2>&1)
if grep -qx "PASS docs.*$label (2 blocks ran: 2 sql; 1 skipped: norun)" <<<"$out"; then
  echo "PASS docs.runner:norun-counted (2 blocks ran, 1 skipped)"
else
  echo "FAIL docs.runner:norun-counted: the runner printed: $(tr '\n' ' ' <<<"$out")"
  rc=1
fi

EXT=${EXT:-build/idempotency.so} "$PY" tests/python/run_docs.py "${args[@]}" || rc=1
exit "$rc"
