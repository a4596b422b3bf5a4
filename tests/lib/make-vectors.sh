#!/bin/sh
# Regenerate tests/fixtures/keys.json without the extension: the canonical
# form comes from tests/js/vectors.cjs (JavaScript), the key from `xxhsum -H2`
# (Debian package xxhash). Run from anywhere; commit the result.
#   sh tests/lib/make-vectors.sh          write keys.json
#   sh tests/lib/make-vectors.sh --check  exit 1 if keys.json is stale
set -eu
tests=$(cd "$(dirname "$0")/.." && pwd)
command -v node >/dev/null || { echo "make-vectors: node is needed" >&2; exit 2; }
command -v xxhsum >/dev/null || { echo "make-vectors: xxhsum is needed (apt-get install xxhash)" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
node "$tests/js/vectors.cjs" make >"$tmp"
if [ "${1:-}" = "--check" ]; then
  cmp -s "$tmp" "$tests/fixtures/keys.json"
else
  cp "$tmp" "$tests/fixtures/keys.json"
  echo "wrote $(grep -c '"key"' "$tests/fixtures/keys.json") vectors to tests/fixtures/keys.json"
fi
