# sqlite-idempotency: build, demo, test, bench, install, sanitizers.
#
#   make            build/idempotency.so (the loadable extension)
#   make demo       the seed's counterexample, its repair, then the ledger
#   make test       every suite; ends with "N passed, N failed[, N skipped]"
#   make sanitize   every suite again under AddressSanitizer + UBSan
#   make valgrind   the C suites under valgrind (no leaks allowed)
#   make fuzz       a short libFuzzer run of each target (clang)
#   make bench      ratios against plain SQLite, measured in one run
#   make bench-peers  the same tool calls through Ledger.call and its peers (Redis, Postgres, DBOS), one run
#     (optional: needs redis-server, postgresql and npm ci in bench/peers; says so and skips without them)
#   make lint       clang-format drift, cppcheck, -Werror build
#   make install    PREFIX=/usr/local DESTDIR= (LIBDIR, INCLUDEDIR); make uninstall
#   make dist       build/dist/: this machine's manylinux wheel, the sdist, npm packages, SHA256SUMS
#     (PLATFORMS="linux-x64 linux-arm64" for both, as make release does)
#   make sql-audit DB=app.db      the sql/ kit, run with sqlite3 -bail
#     (also sql-operations, sql-migrate, sql-install)

PREFIX ?= /usr/local
DESTDIR ?=
SHARED ?= ../shared
CC ?= cc
UNAME_S := $(shell uname -s)
ifeq ($(UNAME_S),Darwin)
  SO := dylib
  SOFLAGS := -dynamiclib -undefined dynamic_lookup
else
  SO := so
  SOFLAGS := -shared
endif

BUILD ?= build
OPT ?= -O2
WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS ?= $(OPT) -g
ALL_CFLAGS := $(CFLAGS) $(WARN) -std=gnu11 -fPIC -fvisibility=hidden -Iinclude -Iext $(EXTRA_CFLAGS)
LDLIBS_EXT := -lm $(EXTRA_LDFLAGS)

EXT_SRC := $(wildcard ext/*.c)
PURE_SRC := ext/canonical.c ext/grammar.c ext/shortest.c
EXT_HDR := ext/idem_internal.h ext/idem_num.h include/idempotency.h
EXT := $(BUILD)/idempotency.$(SO)

export SHARED BUILD EXT

.PHONY: all deps test demo screenshots bench sanitize valgrind fuzz lint format install uninstall clean
all: deps $(EXT)

# System packages: installed when running as root on Debian, else named.
DEPS_PKGS := libsqlite3-dev sqlite3 libxxhash-dev xxhash
deps:
	@sh tests/lib/deps.sh $(DEPS_PKGS)

$(EXT): $(EXT_SRC) $(EXT_HDR) Makefile | $(BUILD)
	$(CC) $(ALL_CFLAGS) $(SOFLAGS) -o $@ $(EXT_SRC) $(LDLIBS_EXT)

$(BUILD):
	mkdir -p $(BUILD)

include tests/tests.mk

.PHONY: bench-peers
bench-peers: $(EXT)
	@bash bench/peers/run.sh $(EXT)

test: all test-programs
	@bash tests/run.sh

demo:
	@$(MAKE) -s all >/dev/null && bash tests/lib/demo.sh

# docs/operating.md's pictures of the page: the browser test of
# tests/suites/59-serve.sh saves them (chromium and puppeteer-core needed)
screenshots: all
	@SHOTS=docs/images bash tests/suites/59-serve.sh | grep -E '^(FAIL|SKIP)|screenshot' ; ls -l docs/images/serve-*.png

sanitize:
	$(MAKE) BUILD=build/asan OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" SANITIZE=1 test

# The plain-SQL kit, each file run by a runner that stops at the first
# error (without -bail the sqlite3 shell goes on and commits the rest).
DB ?=
sql-check-db:
	@test -n "$(DB)" || { echo "name the database: make $(MAKECMDGOALS) DB=app.db"; exit 2; }
sql-operations: sql-check-db
	sqlite3 -bail "$(DB)" < sql/operations.sql
sql-audit: sql-check-db
	sqlite3 -bail -readonly "$(DB)" < sql/audit.sql
sql-migrate: sql-check-db
	sqlite3 -bail "$(DB)" < sql/migrate.sql
sql-install: all sql-check-db
	sqlite3 -bail -cmd ".load $(basename $(EXT))" "$(DB)" < sql/install-ledger.sql
.PHONY: sql-check-db sql-operations sql-audit sql-migrate sql-install

clean:
	rm -rf build

LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
install: all
	install -d "$(DESTDIR)$(LIBDIR)/sqlite3" "$(DESTDIR)$(INCLUDEDIR)"
	install -m 0755 $(EXT) "$(DESTDIR)$(LIBDIR)/sqlite3/idempotency.$(SO)"
	install -m 0644 include/idempotency.h "$(DESTDIR)$(INCLUDEDIR)/idempotency.h"

# make dist: the release artifacts and SHA256SUMS in $(DIST)
# (bindings/dist.sh, docs/install.md) for PLATFORMS, by default this
# machine's alone (so no cross compiler is needed): the extension built per
# platform (bindings/dist-lib.sh: the other platform cross-compiled, each
# checked by bindings/check-lib.sh), the manylinux wheels, the sdist, the npm
# package and its per-platform packages. DIST_PARTS chooses the packages
# (python, node). make release is make dist for every release platform.
DIST ?= $(BUILD)/dist
RELEASE_PLATFORMS := linux-x64 linux-arm64
HOST_PLATFORM := $(patsubst x86_64,linux-x64,$(patsubst aarch64,linux-arm64,$(shell uname -m)))
PLATFORMS ?= $(HOST_PLATFORM)
DIST_LIBS := $(foreach p,$(PLATFORMS),$(DIST)/lib/$(p)/idempotency.so)
$(DIST)/lib/%/idempotency.so: $(EXT_SRC) $(EXT_HDR) Makefile bindings/dist-lib.sh bindings/check-lib.sh | deps
	@CC="$(CC)" bash bindings/dist-lib.sh $* $@ $(EXT_SRC)
dist: deps $(DIST_LIBS)
	@bash bindings/dist.sh "$(DIST)" "$(PLATFORMS)" $(DIST_PARTS)
release:
	@$(MAKE) --no-print-directory dist PLATFORMS="$(RELEASE_PLATFORMS)"
.PHONY: dist release

uninstall:
	rm -f "$(DESTDIR)$(LIBDIR)/sqlite3/idempotency.$(SO)" "$(DESTDIR)$(INCLUDEDIR)/idempotency.h"
	-rmdir "$(DESTDIR)$(LIBDIR)/sqlite3" 2>/dev/null
