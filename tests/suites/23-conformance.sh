#!/usr/bin/env bash
# tests/conformance/ (keys and decision sequences as data; its README.md is
# the format), run by one runner per implementation on the same files:
#   c       $BUILD/conformance (tests/c/conformance.c): SQL through the
#           extension; under $TEST_WRAP (valgrind) and in the sanitizer build too
#   python  tests/python/test_conformance.py: the Python package, with
#           Debian's /usr/bin/python3
#   node    tests/js/test_conformance.mjs: the Node package on better-sqlite3 12
#   go      tests/go/conformance: the Go package (bindings/go) on
#           mattn/go-sqlite3, built offline in GOPATH mode (tests/lib/golang.sh)
#   rust    tests/rust/conformance: the Rust crate (bindings/rust) on
#           rusqlite, built offline over Debian's crates (tests/lib/rust.sh)
# each on the test clock $BUILD/testclock.so. Each runner prints one PASS
# line per file, or a FAIL line naming the file, the step, and expected vs
# got; a runner that passes fewer files than it was given fails. Then:
#   generated  tools/gen_conformance.py --check: the transitions files are
#              what the generator writes from its states table
#   keys-independent  the vectors keys.json adds, against the npm
#              canonicalize and `xxhsum -H2` (no extension involved)
#   broken     a copy of sequences/mismatch.json whose tool-mismatch step
#              (step 2) expects "admitted": every runner must fail on that
#              step, so a runner that cannot tell a broken rule cannot pass
# A runtime that is absent skips, saying why. Under the sanitizer build the
# interpreters use build/idempotency.so and build/testclock.so (an
# uninstrumented interpreter cannot load the sanitized ones), or skip when
# those are not built.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
# shellcheck source=tests/lib/interp.sh
. tests/lib/interp.sh
# shellcheck source=tests/lib/nodepkg.sh
. tests/lib/nodepkg.sh
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
prog=$BUILD/conformance
clock=$BUILD/testclock.so
files=(tests/conformance/keys.json tests/conformance/sequences/*.json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

# The broken copy: the first step that expects "differs": "tool" (step 2)
# now expects the call admitted.
broken=$tmp/broken-mismatch.json
sed '0,/"differs": "tool"/{/"differs": "tool"/s/"decision": "mismatch"/"decision": "admitted"/}' \
  tests/conformance/sequences/mismatch.json >"$broken"
want_broken="$broken: step 2 (claim): decision: expected \"admitted\", got \"mismatch\""
if cmp -s "$broken" tests/conformance/sequences/mismatch.json; then
  echo "FAIL conformance:broken: the copy of sequences/mismatch.json was not changed (its step 2 no longer expects \"differs\": \"tool\" with \"decision\": \"mismatch\")"
  rc=1
fi

# run_runner NAME CMD...: the runner on every file, then on the broken copy.
run_runner() {
  local name=$1 out status npass
  shift
  out=$(timeout 300 "$@" "${files[@]}" 2>&1)
  status=$?
  printf '%s\n' "$out"
  npass=$(grep -c "^PASS conformance\.$name:" <<<"$out")
  if [ "$status" -eq 99 ]; then
    echo "FAIL conformance.$name: memory errors or leaks reported under TEST_WRAP (status 99)"
    rc=1
  elif [ "$status" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    echo "FAIL conformance.$name: the runner exited with status $status without reporting a failed check"
    rc=1
  elif [ "$status" -eq 0 ] && [ "$npass" -ne "${#files[@]}" ]; then
    echo "FAIL conformance.$name: $npass files passed of ${#files[@]} given"
    rc=1
  fi
  [ "$status" -eq 0 ] || rc=1
  out=$(timeout 120 "$@" "$broken" 2>&1)
  status=$?
  if [ "$status" -eq 1 ] && grep -qxF "FAIL conformance.$name:$want_broken" <<<"$out"; then
    echo "PASS conformance.$name:broken-rule-fails (the tool-mismatch step expecting \"admitted\" fails at step 2)"
  else
    echo "FAIL conformance.$name:broken-rule-fails: status $status, expected 1 and the line: FAIL conformance.$name:$want_broken; got: $(head -3 <<<"$out")"
    rc=1
  fi
}

# --- C: SQL through the extension ----------------------------------------------
if [ ! -x "$prog" ] || [ ! -f "$EXT" ] || [ ! -f "$clock" ]; then
  echo "FAIL conformance.c: $prog, $clock or $EXT is missing (make test-programs)"
  rc=1
else
  mkdir -p "$tmp/c"
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  run_runner c ${TEST_WRAP:-} "$prog" --ext "$EXT" --clock "$clock" --dir "$tmp/c"
fi

# --- the generated files ---------------------------------------------------------
gen_py=$PY
[ -x "$gen_py" ] || gen_py=python3
if ! command -v "$gen_py" >/dev/null 2>&1; then
  echo "SKIP conformance:generated: no python3 to run tools/gen_conformance.py --check"
elif out=$("$gen_py" tools/gen_conformance.py --check 2>&1); then
  echo "PASS conformance:generated (tools/gen_conformance.py --check: the transitions files are the generator's)"
else
  echo "FAIL conformance:generated: $out (run: python3 tools/gen_conformance.py)"
  rc=1
fi

# --- the vectors keys.json adds, checked without the extension --------------------
# (tests/fixtures/keys.json, which it also reads, is checked so by 21-vectors):
# canonical is the npm canonicalize of args, key is `xxhsum -H2` of
# tenant:conversation:tool:canonical.
if ! command -v node >/dev/null 2>&1 || [ ! -f tests/js/node_modules/canonicalize/package.json ]; then
  echo "SKIP conformance:keys-independent: needs node and canonicalize in tests/js/node_modules (npm ci there)"
elif ! command -v xxhsum >/dev/null 2>&1; then
  echo "SKIP conformance:keys-independent: xxhsum is not installed (Debian package xxhash)"
else
  # shellcheck disable=SC2016  # the program's ${...} are JavaScript's
  if ! (cd tests/js && node --input-type=module -e '
import canonicalize from "canonicalize";
import fs from "node:fs";
const d = JSON.parse(fs.readFileSync("../conformance/keys.json", "utf8"));
d.vectors.forEach((v, i) => {
  const c = canonicalize(JSON.parse(v.args));
  if (c !== v.canonical) console.log(`FAIL conformance:keys-independent: vector ${i + 1}: canonicalize gives ${c}, the file says ${v.canonical}`);
  else console.log([i + 1, v.tenant, v.conversation, v.tool, v.canonical, v.key].join("\t"));
});') >"$tmp/vectors.tsv"; then
    echo "FAIL conformance:keys-independent: cannot read tests/conformance/keys.json"
    rc=1
  fi
  bad=0
  grep '^FAIL ' "$tmp/vectors.tsv" && bad=1
  n=0
  while IFS=$'\t' read -r i tenant conversation tool canonical key; do
    got=$(printf '%s:%s:%s:%s' "$tenant" "$conversation" "$tool" "$canonical" | xxhsum -H2)
    got="idem1-${got%% *}"
    if [ "$got" != "$key" ]; then
      echo "FAIL conformance:keys-independent: vector $i: xxhsum gives $got, the file says $key"
      bad=1
    fi
    n=$((n + 1))
  done < <(grep -v '^FAIL ' "$tmp/vectors.tsv")
  if [ "$bad" -eq 0 ] && [ "$n" -gt 0 ]; then
    echo "PASS conformance:keys-independent ($n vectors of keys.json: canonicalize and xxhsum -H2 agree with the file)"
  elif [ "$bad" -eq 0 ]; then
    echo "FAIL conformance:keys-independent: keys.json has no \"vectors\" of its own"
    bad=1
  fi
  [ "$bad" -eq 0 ] || rc=1
fi

# --- the packages: the interpreters load an uninstrumented build -------------------
pext=$EXT pclock=$clock
case "$EXT" in
  *build/asan/*) pext=build/idempotency.so pclock=build/testclock.so ;;
esac
if [ ! -f "$pext" ] || [ ! -f "$pclock" ]; then
  for n in python node; do
    echo "SKIP conformance.$n: $pext or $pclock is not built (an uninstrumented interpreter cannot load the sanitizer build; run make all test-programs)"
  done
  exit $rc
fi

# --- Python: the package, Debian's /usr/bin/python3 ---------------------------------
if ! python_skip conformance; then
  mkdir -p "$tmp/py" "$tmp/python"
  cp -r bindings/python/sqlite_idempotency "$tmp/py/"
  cp "$pext" "$tmp/py/sqlite_idempotency/idempotency.so"
  PYTHONPATH=$tmp/py PYTHONDONTWRITEBYTECODE=1 run_runner python "$PY" tests/python/test_conformance.py \
    --clock "$pclock" --dir "$tmp/python"
fi

# --- Node: the package on better-sqlite3 12 -----------------------------------------
node_bsql conformance node tests/js
if [ "$node_ready" = 1 ]; then
  mkdir -p "$tmp/proj/node_modules" "$tmp/node"
  stage_node_pkg "$tmp/proj/node_modules" "$pext"
  for d in tests/js/node_modules/* tests/js/node_modules/@*; do
    [ -e "$tmp/proj/node_modules/$(basename "$d")" ] || ln -s "$ROOT/$d" "$tmp/proj/node_modules/$(basename "$d")"
  done
  run_runner node node tests/js/test_conformance.mjs --project "$tmp/proj" --clock "$pclock" --dir "$tmp/node"
fi

# --- Go: the package (bindings/go: the C sources through cgo, registered with
# sqlite3_auto_extension) on mattn/go-sqlite3, built offline ---------------------------
# shellcheck source=tests/lib/golang.sh
. tests/lib/golang.sh
go_ready conformance go
if [ "$go_ok" = 1 ]; then
  mkdir -p "$tmp/gopath" "$tmp/go"
  if out=$(go_env "$tmp/gopath" && cd "$tmp/gopath/src/$GO_IMPORT" && go build -o "$tmp/conformance-go" ./tests/go/conformance 2>&1); then
    run_runner go "$tmp/conformance-go" --clock "$pclock" --dir "$tmp/go"
  else
    echo "FAIL conformance.go: the runner (tests/go/conformance) does not build: $(head -c 600 <<<"$out")"
    rc=1
  fi
fi

# --- Rust: the crate (bindings/rust: the C sources through the cc crate,
# registered with sqlite3_auto_extension) on rusqlite, built offline ---------------------
# shellcheck source=tests/lib/rust.sh
. tests/lib/rust.sh
rust_ready conformance rust
if [ "$rust_ok" = 1 ]; then
  mkdir -p "$tmp/rust"
  if out=$(cd tests/rust/conformance && cargo_offline build -q 2>&1); then
    run_runner rust "$ROOT/build/cargo-target/debug/conformance" --clock "$pclock" --dir "$tmp/rust"
  else
    echo "FAIL conformance.rust: the runner (tests/rust/conformance) does not build: $(head -c 600 <<<"$out")"
    rc=1
  fi
fi
exit $rc
