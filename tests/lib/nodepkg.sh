# shellcheck shell=bash
# tests/lib/nodepkg.sh: the Node package as npm installs it, for suites that
# run it from the source tree. Sourced.

# stage_node_pkg NODE_MODULES EXT: NODE_MODULES/sqlite-idempotency (a copy
# of bindings/node) and, beside it, the platform package npm installs as
# its optional dependency (sqlite-idempotency-<platform>-<arch>, holding
# the extension EXT and a package.json of the same version; docs/install.md).
stage_node_pkg() {
  local nm=$1 ext=$2 plat version
  mkdir -p "$nm"
  cp -r bindings/node "$nm/sqlite-idempotency"
  plat=$(node -p 'process.platform + "-" + process.arch')
  version=$(node -p 'require("./bindings/node/package.json").version')
  mkdir -p "$nm/sqlite-idempotency-$plat"
  printf '{"name": "sqlite-idempotency-%s", "version": "%s"}\n' "$plat" "$version" \
    >"$nm/sqlite-idempotency-$plat/package.json"
  cp "$ext" "$nm/sqlite-idempotency-$plat/idempotency.so"
}
