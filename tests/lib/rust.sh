# shellcheck shell=bash
# The Rust crate (bindings/rust) built offline over Debian's crates
# (librust-*-dev in /usr/share/cargo/registry):
#
#   rust_ready PREFIX NAMES...   sets rust_ok=1, or prints a SKIP line per
#                                name (no cargo, or a crate missing) and sets rust_ok=0
#   cargo_offline ARGS...        cargo ARGS in the crate of the current directory,
#                                crates.io replaced by that directory, offline;
#                                targets in build/cargo-target
RUST_CRATES=(rusqlite-0.28.0 serde_json-1.0.87 serde-1.0.152 cc-1.0.73)
rust_ready() {
  local prefix=$1 n c
  shift
  rust_ok=1
  if ! command -v cargo >/dev/null 2>&1; then
    for n in "$@"; do echo "SKIP $prefix.$n: cargo is not installed (Debian: apt-get install cargo librust-rusqlite-dev librust-serde-json-dev librust-cc-dev)"; done
    rust_ok=0
    return
  fi
  for c in "${RUST_CRATES[@]}"; do
    if [ ! -d "/usr/share/cargo/registry/$c" ]; then
      for n in "$@"; do echo "SKIP $prefix.$n: the crate $c is not in /usr/share/cargo/registry (Debian: apt-get install librust-rusqlite-dev librust-serde-json-dev librust-cc-dev)"; done
      rust_ok=0
      return
    fi
  done
}
cargo_offline() {
  # the crates' Cargo.lock are not kept (.gitignore): one a newer cargo
  # wrote (format 4) stops Debian's cargo 1.65, so each build writes its own
  rm -f Cargo.lock
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/build/cargo-target} cargo "$@" --offline \
    --config 'source.crates-io.replace-with="debian"' --config 'source.debian.directory="/usr/share/cargo/registry"'
}
