#!/bin/sh
# Regenerate tests/vectors/keys.json without the extension: the canonical
# form comes from vectors.js (JavaScript), the key from `xxhsum -H2`
# (Debian package xxhash). Run from anywhere; commit the result.
#   sh tests/vectors/make-vectors.sh          write keys.json
#   sh tests/vectors/make-vectors.sh --check  exit 1 if keys.json is stale
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "make-vectors: node is needed" >&2; exit 2; }
command -v xxhsum >/dev/null || { echo "make-vectors: xxhsum is needed (apt-get install xxhash)" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
node "$dir/vectors.js" make >"$tmp"
if [ "${1:-}" = "--check" ]; then
  cmp -s "$tmp" "$dir/keys.json"
else
  cp "$tmp" "$dir/keys.json"
  echo "wrote $(grep -c '"key"' "$dir/keys.json") vectors to tests/vectors/keys.json"
fi
