# The dqlite node and clients (tests/dqlite/*.go), built offline from
# Debian's go-dqlite sources (golang-github-canonical-go-dqlite-dev) in
# GOPATH mode, into build/dqlite/. tests/suites/70-dqlite.sh builds it
# when the packages are present.
DQLITE_GOPATH ?= /usr/share/gocode
DQLITE_BIN := build/dqlite/idemdq

.PHONY: dqlite
dqlite: $(DQLITE_BIN)

$(DQLITE_BIN): $(wildcard tests/dqlite/*.go) tests/dqlite.mk
	mkdir -p build/dqlite/gocache
	cd tests/dqlite && GO111MODULE=off GOPATH=$(DQLITE_GOPATH) GOFLAGS= GOPROXY=off \
	  GOCACHE=$(CURDIR)/build/dqlite/gocache CGO_ENABLED=1 CGO_LDFLAGS_ALLOW='-Wl,-z,now' \
	  go build -o $(CURDIR)/$(DQLITE_BIN) .
