#!/usr/bin/env bash
# tests/fixtures/keys.json, checked three ways:
#   file:    the file is consistent (fields, grammar, key shape, canonical is
#            RFC 8785 of args as computed in JavaScript, one key per call),
#            and make-vectors.sh reproduces it byte for byte;
#   sql:     the extension's idem_canonical/idem_key give the same text and
#            key (through the runner, so sanitized builds work too);
#   xxhsum:  `xxhsum -H2` over printf'd tenant:conversation:tool:canonical
#            bytes gives the key, without the extension.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
vec=tests/fixtures/keys.json
js=tests/js/vectors.cjs
rc=0

if ! command -v node >/dev/null 2>&1; then
  echo "SKIP vectors: node is not installed (needed to read $vec)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. the file itself
# (it prints a line per check and exits non-zero after a FAIL)
node "$js" check "$vec" || rc=1
if command -v xxhsum >/dev/null 2>&1; then
  if sh tests/lib/make-vectors.sh --check; then
    echo "PASS vectors:file-reproducible"
  else
    echo "FAIL vectors:file-reproducible: tests/lib/make-vectors.sh does not reproduce $vec"
    rc=1
  fi
else
  echo "SKIP vectors:file-reproducible: xxhsum is not installed (Debian package xxhash)"
fi

# 2. through SQL
if [ ! -x "$BUILD/sqltest" ] || [ ! -f "$EXT" ]; then
  echo "FAIL vectors:sql: $BUILD/sqltest or $EXT is missing (make test-programs)"
  rc=1
elif ! node "$js" sql "$vec" >"$tmp/keys-vectors.sql"; then
  echo "FAIL vectors:sql: $js cannot write the SQL checks of $vec"
  rc=1
else
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(${TEST_WRAP:-} "$BUILD/sqltest" --ext "$EXT" "$tmp/keys-vectors.sql" 2>&1)
  status=$?
  printf '%s\n' "$out"
  if [ "$status" -eq 99 ]; then
    echo "FAIL vectors:sql: memory errors or leaks reported under TEST_WRAP (status 99)"
    rc=1
  elif grep -q '^FAIL ' <<<"$out"; then
    rc=1
  elif [ "$status" -ne 0 ]; then
    echo "FAIL vectors:sql: the runner exited with status $status without reporting a failed check"
    rc=1
  fi
fi

# 3. through xxhsum, independently of the extension
if ! command -v xxhsum >/dev/null 2>&1; then
  echo "SKIP vectors:xxhsum: xxhsum is not installed (Debian package xxhash)"
  exit $rc
fi
node "$js" tsv "$vec" >"$tmp/keys.tsv" || { echo "FAIL vectors:xxhsum: cannot list $vec"; exit 1; }
while IFS=$'\t' read -r n tenant conversation tool canonical key; do
  got=$(printf '%s:%s:%s:%s' "$tenant" "$conversation" "$tool" "$canonical" | xxhsum -H2)
  got="idem1-${got%% *}"
  if [ "$got" = "$key" ]; then
    echo "PASS vectors:xxhsum:$n"
  else
    echo "FAIL vectors:xxhsum:$n: xxhsum gives $got, the file says $key"
    rc=1
  fi
done <"$tmp/keys.tsv"
exit $rc
