#!/usr/bin/env bash
# The Rust crate (bindings/rust; docs/install.md, "The Rust crate"), built
# offline over Debian's crates (tests/lib/rust.sh):
#
#   test      cargo test: a call and its replay with the replay's words, an
#             unknown outcome never run again (its words name the target), a
#             reworded call to the same target refused as a conflict, failed
#             and not sent, in progress, a guarded write in one BEGIN
#             IMMEDIATE transaction, refusals; the words are the Node
#             package's words.json; the doc test of the crate
#   docs      docs/install.md's Rust crate example (its Cargo.toml and
#             main.rs), built and run as written in a directory beside a
#             checkout named sqlite-idempotency, its output compared
#
# The conformance files run through the crate in 23-conformance.sh. The
# crate compiles the C sources itself (cc, -O2): the sanitizer and valgrind
# runs test the same C through the other suites.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
# shellcheck source=tests/lib/rust.sh
. tests/lib/rust.sh
if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP rust: runs in make test only: the crate builds its own copy of the C sources with cc"
  exit 0
fi
rust_ready rust test docs
[ "$rust_ok" = 1 ] || exit 0
rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- cargo test, one line per test ------------------------------------------------
out=$(cd bindings/rust && cargo_offline test 2>&1)
status=$?
n=0
while read -r name verdict; do
  n=$((n + 1))
  if [ "$verdict" = ok ]; then echo "PASS rust:test:$name"; else echo "FAIL rust:test:$name: $(grep -A8 -- "---- $name stdout ----" <<<"$out" | tail -n +2 | tr '\n' ' ' | head -c 600)"; fi
done < <(sed -n -E 's/^test (.*) \.\.\. (ok|FAILED)$/\1 \2/p' <<<"$out" | tr ' ' '_' | sed -E 's/_(ok|FAILED)$/ \1/')
if [ "$status" -ne 0 ] || [ "$n" -lt 8 ]; then
  echo "FAIL rust:test: cargo test exited $status after $n tests (want 8 or more): $(tail -5 <<<"$out" | tr '\n' ' ' | head -c 600)"
  rc=1
fi

# --- docs/install.md's example, as written -------------------------------------------
names=$(/usr/bin/python3 tests/python/doc_blocks.py --suite 53-rust docs/install.md "$tmp/blocks" 2>&1)
toml= rs= want=
if [ "$(tr '\n' ' ' <<<"$names")" = "01.toml 02.rust " ]; then
  toml=$(cat "$tmp/blocks/01.toml")
  rs=$(cat "$tmp/blocks/02.rust")
  want=$( [ -f "$tmp/blocks/02.out" ] && cat "$tmp/blocks/02.out")
fi
if [ -z "$toml" ] || [ -z "$rs" ] || [ -z "$want" ]; then
  echo "FAIL rust:docs: docs/install.md must hold a toml and a rust block marked for this suite, with an output block after them (found: $names)"
  rc=1
else
  mkdir -p "$tmp/example/src"
  ln -s "$ROOT" "$tmp/sqlite-idempotency"
  printf '%s\n' "$toml" >"$tmp/example/Cargo.toml"
  printf '%s\n' "$rs" >"$tmp/example/src/main.rs"
  if got=$(cd "$tmp/example" && cargo_offline run -q 2>&1) && [ "$got" = "$want" ]; then
    echo "PASS rust:docs (docs/install.md's Rust crate example prints what the docs show)"
  else
    echo "FAIL rust:docs: it printed $(head -c 600 <<<"$got"); the docs say $want"
    rc=1
  fi
fi
exit $rc
