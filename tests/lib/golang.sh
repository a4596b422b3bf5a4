# shellcheck shell=bash
# The Go package (bindings/go) built offline, in GOPATH mode over Debian's
# Go packages (golang-github-mattn-go-sqlite3-dev in /usr/share/gocode):
#
#   go_ready PREFIX NAMES...   sets go_ok=1, or prints a SKIP line per name
#                              (no go, or no mattn/go-sqlite3) and sets go_ok=0
#   go_env DIR                 exports the environment of a build: a GOPATH in
#                              DIR whose src/github.com/sqlite-idempotency/
#                              sqlite-idempotency is this tree, then
#                              /usr/share/gocode; GO111MODULE=off; the build
#                              cache in build/gocache (kept between runs)
GO_IMPORT=github.com/sqlite-idempotency/sqlite-idempotency
go_ready() {
  local prefix=$1 n
  shift
  go_ok=1
  if ! command -v go >/dev/null 2>&1; then
    for n in "$@"; do echo "SKIP $prefix.$n: go is not installed (Debian: apt-get install golang-go)"; done
    go_ok=0
  elif [ ! -f /usr/share/gocode/src/github.com/mattn/go-sqlite3/sqlite3.go ]; then
    for n in "$@"; do echo "SKIP $prefix.$n: mattn/go-sqlite3 is not in /usr/share/gocode (Debian: apt-get install golang-github-mattn-go-sqlite3-dev)"; done
    go_ok=0
  fi
}
go_env() {
  mkdir -p "$1/src/github.com/sqlite-idempotency" "$ROOT/build/gocache"
  ln -sfn "$ROOT" "$1/src/$GO_IMPORT"
  export GO111MODULE=off GOPATH="$1:/usr/share/gocode" GOCACHE="$ROOT/build/gocache" GOFLAGS= CGO_ENABLED=1
}
