#!/usr/bin/env bash
# The Go package (bindings/go; docs/install.md, "The Go package"), built
# offline in GOPATH mode over Debian's mattn/go-sqlite3 (tests/lib/golang.sh):
#
#   vet       go vet and gofmt -l over the package and the conformance runner
#   test      go test: a call and its replay with the replay's words, an
#             unknown outcome never run again (its words name the target),
#             a reworded call to the same target refused as a conflict,
#             failed and not sent, in progress, a guarded write in one
#             BEGIN IMMEDIATE transaction, refusals; words.json is the Node
#             package's byte for byte; every ext/*.c is compiled in
#   docs      docs/install.md's Go package example, built and run as
#             written, its output compared with the block after it
#
# The conformance files run through the package in 23-conformance.sh. The
# package compiles the C sources itself (cgo, -O2): the sanitizer and
# valgrind runs test the same C through the other suites.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
# shellcheck source=tests/lib/golang.sh
. tests/lib/golang.sh
if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP go: runs in make test only: the package builds its own copy of the C sources with cgo"
  exit 0
fi
go_ready go vet test docs
[ "$go_ok" = 1 ] || exit 0
rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go_env "$tmp/gopath"
src=$tmp/gopath/src/$GO_IMPORT

# --- vet -------------------------------------------------------------------------
if out=$(cd "$src" && go vet ./bindings/go ./tests/go/conformance 2>&1) && [ -z "$(gofmt -l bindings/go tests/go)" ]; then
  echo "PASS go:vet (go vet and gofmt -l: nothing to say)"
else
  echo "FAIL go:vet: $(head -c 800 <<<"$out") $(gofmt -l bindings/go tests/go | tr '\n' ' ')"
  rc=1
fi

# --- go test, one line per test ------------------------------------------------------
out=$(cd "$src/bindings/go" && timeout 600 go test -count=1 -v . 2>&1)
status=$?
n=0
while read -r verdict name took; do
  n=$((n + 1))
  if [ "$verdict" = PASS ]; then echo "PASS go:test:$name $took"; else echo "FAIL go:test:$name $took: $(grep -A5 -- "--- FAIL: $name" <<<"$out" | tail -n +2 | tr '\n' ' ' | head -c 600)"; fi
done < <(sed -n -E 's/^--- (PASS|FAIL): ([A-Za-z0-9_]+) (.*)$/\1 \2 \3/p' <<<"$out")
if [ "$status" -ne 0 ] || [ "$n" -lt 8 ]; then
  echo "FAIL go:test: go test exited $status after $n tests (want 8 or more): $(tail -5 <<<"$out" | tr '\n' ' ' | head -c 600)"
  rc=1
fi

# --- docs/install.md's example, as written ---------------------------------------------
names=$(/usr/bin/python3 tests/python/doc_blocks.py --suite 52-go docs/install.md "$tmp/blocks" 2>&1)
block=$( [ "$names" = 01.go ] && cat "$tmp/blocks/01.go")
want=$( [ -f "$tmp/blocks/01.out" ] && cat "$tmp/blocks/01.out")
if [ -z "$block" ] || [ -z "$want" ]; then
  echo "FAIL go:docs: docs/install.md must hold one go block marked for this suite, with an output block after it (found: $names)"
  rc=1
else
  mkdir -p "$tmp/run"
  ex=$tmp/gopath/src/example
  mkdir -p "$ex"
  printf '%s\n' "$block" >"$ex/main.go"
  if ! out=$(cd "$ex" && go build -o "$tmp/run/example" . 2>&1); then
    echo "FAIL go:docs: the example does not build: $(head -c 600 <<<"$out")"
    rc=1
  elif got=$(cd "$tmp/run" && ./example 2>&1) && [ "$got" = "$want" ]; then
    echo "PASS go:docs (docs/install.md's Go package example prints what the docs show)"
  else
    echo "FAIL go:docs: it printed $(head -c 400 <<<"$got"); the docs say $want"
    rc=1
  fi
fi
exit $rc
