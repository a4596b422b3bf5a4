# tests/tests.mk: the test programs and the developer targets, included by
# the Makefile. The layout of tests/ is in tests/README.md.
#
#   make test-programs  every program the suites run (built by make test)
#   make compat         the extension and tests/c/sqltest.c against the newer
#                       SQLite of better-sqlite3 (60-newer-sqlite.sh)
#   make static         ext/ compiled with -DSQLITE_CORE, its C and C++ users (62-static.sh)
#   make fuzz [FUZZ_SECONDS=60]  libFuzzer targets in tests/fuzz/ (13-fuzz.sh), then model-long
#   make model-long     a million model steps (MODEL_STEPS, MODEL_SEED)
#   make dqlite         the dqlite node and clients of tests/dqlite/ (70-dqlite.sh)
#   make bench          build bench/bench.c against the system libsqlite3 and
#                       run it on $(SHARED)/bench-fixtures (ratios from one run);
#                       BENCH_MAX_ROWS=5000000 adds the 5M-row growth step.
#                       The bench program is also built by `make test` (never
#                       run there: speed is not a test), so it cannot rot.
#   make soak           mixed load with kills for SOAK_SECONDS (default 60),
#                       throughput and memory per interval, invariants at the
#                       end (tests/python/soak.py; not in make test, whose
#                       71-soak runs a five-second smoke of it)
#   make valgrind       every suite with its C programs under valgrind
#                       (memory errors and definite/indirect leaks fail)
#   make lint           clang-format drift, cppcheck, a -Werror build in build/lint
#   make format         rewrite the C sources in the .clang-format style
#
# The programs in $(BUILD) are built with $(ALL_CFLAGS), so `make sanitize`
# (BUILD=build/asan) builds sanitized copies next to the sanitized extension
# $(EXT); those that use SQLite link the system libsqlite3.

T := tests/c

.PHONY: test-programs compat static fuzz model-long dqlite bench soak valgrind lint format
test-programs:

# --- the SQL runner -----------------------------------------------------------

# tests/c/sqltest.c runs tests/sql/*.sql. Built into $(BUILD) so that `make
# sanitize` gets a sanitized copy that can load the sanitized extension (the
# sqlite3 shell cannot).
test-programs: $(BUILD)/sqltest

$(BUILD)/sqltest: $(T)/sqltest.c | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/sqltest.c -lsqlite3 $(EXTRA_LDFLAGS)

# --- the pure helpers, linked without SQLite ----------------------------------
#
#   $(BUILD)/test_canonical   unit tests of the canonicaliser  (10-unit.sh)
#   $(BUILD)/test_grammar     unit tests of the key grammar     (10-unit.sh)
#   $(BUILD)/test_jcs         RFC 8785 vectors in $(SHARED)/conformance/jcs (11-jcs.sh)
#   $(BUILD)/jcs_cli          framed stdin -> canonical stdout, for the npm diff (12-diff.sh)
#   $(BUILD)/num_cli          number requests -> answers, for the Node diff (14-numbers.sh)

PURE_TEST_HDR := ext/idem_internal.h ext/idem_num.h $(T)/check.h
PURE_TEST_PROGS := $(BUILD)/test_canonical $(BUILD)/test_grammar $(BUILD)/test_jcs $(BUILD)/jcs_cli \
  $(BUILD)/num_cli

test-programs: $(PURE_TEST_PROGS)

$(BUILD)/test_canonical: $(T)/test_canonical.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/test_canonical.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/test_grammar: $(T)/test_grammar.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/test_grammar.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/test_jcs: $(T)/test_jcs.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/test_jcs.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/jcs_cli: $(T)/jcs_cli.c $(PURE_SRC) ext/idem_internal.h ext/idem_num.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/jcs_cli.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/num_cli: $(T)/num_cli.c $(PURE_SRC) ext/idem_internal.h ext/idem_num.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/num_cli.c $(PURE_SRC) $(LDLIBS_EXT)

# The fuzz suite builds its targets with clang (-fsanitize=fuzzer) into
# $(BUILD)/fuzz and runs each for FUZZ_SECONDS (default 15 in the suite).
FUZZ_SECONDS ?= 15
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/suites/13-fuzz.sh

# --- race, crash, allocation failure, waiting ---------------------------------
#
#   $(BUILD)/race    many processes claim the same keys     (30-race.sh)
#   $(BUILD)/crash   a claiming child is killed at random    (31-crash.sh)
#   $(BUILD)/oom     every allocation of every path fails    (32-oom.sh)
#   $(BUILD)/wait    a claim waits for another connection's write transaction (33-wait.sh)
#   $(BUILD)/settle_race  a settle or resolve meets another writer between its read and write (33-wait.sh)

STRESS_HDR := $(T)/stress.h
STRESS_PROGS := $(BUILD)/race $(BUILD)/crash $(BUILD)/oom $(BUILD)/wait $(BUILD)/settle_race

test-programs: $(STRESS_PROGS)

$(STRESS_PROGS): $(BUILD)/%: $(T)/%.c $(STRESS_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/$*.c -lsqlite3 $(EXTRA_LDFLAGS)

# --- the model, I/O faults, clock skew ----------------------------------------
#
#   $(BUILD)/model    a reference model vs the ledger, random sequences (34-model.sh)
#   $(BUILD)/faults   failed writes, failed syncs, a full disk (35-faults.sh)
#   $(BUILD)/skew     two connections whose clocks disagree (36-skew.sh)

MODEL_HDR := $(T)/faultvfs.h $(T)/stress.h
MODEL_PROGS := $(BUILD)/model $(BUILD)/faults $(BUILD)/skew

test-programs: $(MODEL_PROGS)

$(MODEL_PROGS): $(BUILD)/%: $(T)/%.c $(MODEL_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/$*.c -lsqlite3 $(EXTRA_LDFLAGS)

MODEL_STEPS ?= 1000000
model-long: all $(BUILD)/model
	@MODEL_STEPS=$(MODEL_STEPS) MODEL_SEED=$(MODEL_SEED) bash tests/lib/model-long.sh
fuzz: model-long

# --- the conformance suite -----------------------------------------------------
#
#   $(BUILD)/conformance      tests/conformance/ through the extension (23-conformance.sh)
#   $(BUILD)/testclock.$(SO)  the test clock that every conformance runner loads
#                             (C, Python, Node): faultvfs.h's VFS, its clock set by SQL

CONFORMANCE_PROGS := $(BUILD)/conformance $(BUILD)/testclock.$(SO)

test-programs: $(CONFORMANCE_PROGS)

$(BUILD)/conformance: $(T)/conformance.c $(T)/stress.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/conformance.c -lsqlite3 $(EXTRA_LDFLAGS)

$(BUILD)/testclock.$(SO): $(T)/testclock.c $(T)/faultvfs.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) $(SOFLAGS) -o $@ $(T)/testclock.c $(EXTRA_LDFLAGS)

# --- the newer SQLite ---------------------------------------------------------
#
#   build/compat/sqlite3.o      the amalgamation of better-sqlite3, compiled once (-O1, slow)
#   build/compat/idempotency.so the extension against its sqlite3ext.h
#   build/compat/sqltest        tests/c/sqltest.c linked statically with it
# The amalgamation is read from tests/js/node_modules (npm ci in tests/js,
# done by the suite when absent); nothing of it is committed. Always built in
# build/compat with its own flags, never sanitized (the suite runs in the
# plain build only).

COMPAT_DIR := build/compat
COMPAT_AMALG := tests/js/node_modules/better-sqlite3/deps/sqlite3
# The compile options better-sqlite3 builds its SQLite with (deps/defines.gypi
# of the pinned version), so the extension meets the library Node users get
# (SQLITE_DQS=0, SQLITE_DEFAULT_FOREIGN_KEYS=1, OMIT_DEPRECATED...). Added:
# SQLITE_ENABLE_STMTVTAB, for sqlite_stmt in tests/sql/15-select.sql.
# Loading extensions is on (better-sqlite3 does not omit it); JSON is
# built in since 3.38.
COMPAT_SQLITE_DEFS := -DHAVE_INT16_T=1 -DHAVE_INT32_T=1 -DHAVE_INT8_T=1 -DHAVE_STDINT_H=1 \
  -DHAVE_UINT16_T=1 -DHAVE_UINT32_T=1 -DHAVE_UINT8_T=1 -DHAVE_USLEEP=1 \
  -DSQLITE_DEFAULT_CACHE_SIZE=-16000 -DSQLITE_DEFAULT_FOREIGN_KEYS=1 \
  -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DEFAULT_WAL_SYNCHRONOUS=1 -DSQLITE_DQS=0 \
  -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_DESERIALIZE \
  -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS4 \
  -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_GEOPOLY -DSQLITE_ENABLE_JSON1 \
  -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_STAT4 \
  -DSQLITE_ENABLE_UPDATE_DELETE_LIMIT -DSQLITE_LIKE_DOESNT_MATCH_BLOBS \
  -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_PROGRESS_CALLBACK -DSQLITE_OMIT_SHARED_CACHE \
  -DSQLITE_OMIT_TCL_VARIABLE -DSQLITE_SOUNDEX -DSQLITE_THREADSAFE=2 \
  -DSQLITE_TRACE_SIZE_LIMIT=32 -DSQLITE_USE_URI=0 \
  -DSQLITE_ENABLE_STMTVTAB
# Our code against the amalgamation's headers: -I puts them before the
# system's sqlite3.h / sqlite3ext.h. Not $(ALL_CFLAGS): build/compat is
# shared by every BUILD and must not pick up sanitizer flags.
COMPAT_CFLAGS := -O2 -g $(WARN) -std=gnu11 -fPIC -fvisibility=hidden -I$(COMPAT_AMALG) -Iinclude -Iext

compat: $(COMPAT_DIR)/idempotency.$(SO) $(COMPAT_DIR)/sqltest

$(COMPAT_AMALG)/sqlite3.c $(COMPAT_AMALG)/sqlite3.h $(COMPAT_AMALG)/sqlite3ext.h:
	@echo "compat: $@ is missing; run: (cd tests/js && npm ci)" >&2
	@exit 1

$(COMPAT_DIR)/sqlite3.o: $(COMPAT_AMALG)/sqlite3.c $(COMPAT_AMALG)/sqlite3.h
	@mkdir -p $(COMPAT_DIR)
	$(CC) -O1 -g0 -w -std=gnu99 $(COMPAT_SQLITE_DEFS) -I$(COMPAT_AMALG) -c -o $@ $(COMPAT_AMALG)/sqlite3.c

$(COMPAT_DIR)/idempotency.$(SO): $(EXT_SRC) $(EXT_HDR) $(COMPAT_AMALG)/sqlite3ext.h $(COMPAT_AMALG)/sqlite3.h
	@mkdir -p $(COMPAT_DIR)
	$(CC) $(COMPAT_CFLAGS) $(SOFLAGS) -o $@ $(EXT_SRC) -lm

$(COMPAT_DIR)/sqltest: $(T)/sqltest.c $(COMPAT_DIR)/sqlite3.o $(COMPAT_AMALG)/sqlite3.h
	$(CC) $(COMPAT_CFLAGS) -o $@ $(T)/sqltest.c $(COMPAT_DIR)/sqlite3.o -lpthread -ldl -lm

# --- the static build ---------------------------------------------------------
#
# $(BUILD)/static/: libidempotency.a and its objects; static_test (C) and
# static_test_cxx (the same file as C++), registered with
# sqlite3_auto_extension against the system libsqlite3; minver, the entry
# point built with a test-only minimum of 9.999.999 so the refusal on a too
# old SQLite can be seen. Cheap, so these are test programs, built with
# $(ALL_CFLAGS) (sanitized in `make sanitize`).

STATIC_DIR := $(BUILD)/static
STATIC_OBJ := $(patsubst ext/%.c,$(STATIC_DIR)/%.o,$(EXT_SRC))
STATIC_LIB := $(STATIC_DIR)/libidempotency.a
STATIC_LIBS := -lsqlite3 -lm $(EXTRA_LDFLAGS)

# The C++ build of static_test only where a C++ compiler is installed
# (62-static.sh skips it otherwise, saying so).
CXX_FOR_TEST ?= g++
HAVE_CXX_FOR_TEST := $(shell command -v $(CXX_FOR_TEST) 2>/dev/null)

test-programs: static
static: $(STATIC_LIB) $(STATIC_DIR)/static_test $(STATIC_DIR)/minver \
  $(if $(HAVE_CXX_FOR_TEST),$(STATIC_DIR)/static_test_cxx)

$(STATIC_DIR)/%.o: ext/%.c $(EXT_HDR)
	@mkdir -p $(STATIC_DIR)
	$(CC) $(ALL_CFLAGS) -DSQLITE_CORE -c -o $@ $<

$(STATIC_LIB): $(STATIC_OBJ)
	rm -f $@
	$(AR) rcs $@ $(STATIC_OBJ)

$(STATIC_DIR)/static_test: $(T)/static_test.c $(STATIC_LIB) include/idempotency.h
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/static_test.c $(STATIC_LIB) $(STATIC_LIBS)

# The same program compiled as C++ (-x c++, headers included in the other
# order): include/idempotency.h must be usable from C++ next to sqlite3.h.
$(STATIC_DIR)/static_test_cxx: $(T)/static_test.c $(STATIC_LIB) include/idempotency.h
	$(CXX_FOR_TEST) $(filter-out -std=gnu11,$(ALL_CFLAGS)) -std=c++11 -DSTATIC_TEST_HEADER_FIRST \
	  -x c++ -c -o $(STATIC_DIR)/static_test_cxx.o $(T)/static_test.c
	$(CXX_FOR_TEST) -o $@ $(STATIC_DIR)/static_test_cxx.o $(STATIC_LIB) $(STATIC_LIBS)

# The entry point with a test-only minimum above any real SQLite; the other
# objects are the static library's.
$(STATIC_DIR)/minver-idempotency.o: ext/idempotency.c $(EXT_HDR)
	@mkdir -p $(STATIC_DIR)
	$(CC) $(ALL_CFLAGS) -DSQLITE_CORE -DIDEM_MIN_SQLITE_VERSION_NUMBER=9999999 -c -o $@ $<

$(STATIC_DIR)/minver: $(T)/minver_test.c $(STATIC_DIR)/minver-idempotency.o $(STATIC_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $(T)/minver_test.c $(STATIC_DIR)/minver-idempotency.o \
	  $(filter-out $(STATIC_DIR)/idempotency.o,$(STATIC_OBJ)) $(STATIC_LIBS)

# --- dqlite -------------------------------------------------------------------
#
# The dqlite node and clients (tests/dqlite/*.go), built offline from
# Debian's go-dqlite sources (golang-github-canonical-go-dqlite-dev) in
# GOPATH mode, into build/dqlite/. tests/suites/70-dqlite.sh builds it
# when the packages are present.
DQLITE_GOPATH ?= /usr/share/gocode
DQLITE_BIN := build/dqlite/idemdq

dqlite: $(DQLITE_BIN)

$(DQLITE_BIN): $(wildcard tests/dqlite/*.go)
	mkdir -p build/dqlite/gocache
	cd tests/dqlite && GO111MODULE=off GOPATH=$(DQLITE_GOPATH) GOFLAGS= GOPROXY=off \
	  GOCACHE=$(CURDIR)/build/dqlite/gocache CGO_ENABLED=1 CGO_LDFLAGS_ALLOW='-Wl,-z,now' \
	  go build -o $(CURDIR)/$(DQLITE_BIN) .

# --- bench --------------------------------------------------------------------

BENCH_BIN := $(BUILD)/bench/bench
BENCH_CFLAGS := -O2 -g $(WARN) -std=gnu11

$(BENCH_BIN): bench/bench.c $(T)/faultvfs.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lsqlite3 -lm

test-programs: $(BENCH_BIN)

bench: all $(BENCH_BIN)
	@test -d "$(SHARED)/bench-fixtures" || { \
	  echo "bench: $(SHARED)/bench-fixtures is missing (set SHARED=<dir holding bench-fixtures/>)"; \
	  exit 2; }
	@$(BENCH_BIN) $(EXT) "$(SHARED)/bench-fixtures" tests/sql/03-plain-grammar-cases.sql

# --- valgrind -----------------------------------------------------------------

# Suites run their C programs through $TEST_WRAP. Exit status 99 marks a
# valgrind finding, so a suite can tell it from the program's own failure.
VALGRIND_WRAP := valgrind --quiet --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect

valgrind: all
	@command -v valgrind >/dev/null 2>&1 || { \
	  echo "valgrind: not installed (Debian: apt-get install valgrind)"; exit 1; }
	@$(MAKE) --no-print-directory test-programs
	@TEST_WRAP="$(VALGRIND_WRAP)" bash tests/run.sh

# --- lint / format ------------------------------------------------------------

LINT_C := $(wildcard ext/*.c ext/*.h include/*.h) $(sort $(wildcard tests/c/*.c tests/c/*.h tests/fuzz/*.c bench/*.c))

# cppcheck: warnings, style, performance and portability. Suppressed:
#   variableScope          the house style declares locals at the top of a
#                          function, as SQLite's own sources do
#   missingIncludeSystem   system headers (sqlite3ext.h, xxhash.h) are not
#                          analysed, only our code
#   knownConditionTrueFalse in keyfuncs.c: quote_key() is only reached with
#                          n >= 1 (a bad byte exists), which cppcheck cannot see
CPPCHECK_FLAGS := --error-exitcode=1 --quiet --std=c11 --inline-suppr \
  --enable=warning,style,performance,portability \
  --suppress=variableScope --suppress=missingIncludeSystem \
  --suppress=knownConditionTrueFalse:ext/keyfuncs.c \
  -Iinclude -Iext

# Runs every check, then fails if any failed, so one run names all problems.
lint:
	@st=0; \
	echo "lint: clang-format --dry-run -Werror"; \
	for f in $(LINT_C); do \
	  n=$$(clang-format --dry-run -Werror "$$f" 2>&1 | grep -c 'clang-format-violations'); \
	  if [ "$$n" -ne 0 ]; then \
	    echo "  $$f: $$n place(s) differ from .clang-format (see: clang-format $$f | diff -u $$f -)"; \
	    st=1; fi; \
	done; \
	[ $$st -eq 0 ] || echo "  fix with: make format"; \
	echo "lint: cppcheck ext/"; \
	cppcheck $(CPPCHECK_FLAGS) ext/ || st=1; \
	echo "lint: -Werror build into build/lint"; \
	$(MAKE) --no-print-directory -B BUILD=build/lint EXTRA_CFLAGS=-Werror \
	  build/lint/idempotency.$(SO) || st=1; \
	mkdir -p build/lint; $(CC) $(BENCH_CFLAGS) -Werror -o build/lint/bench bench/bench.c -lsqlite3 -lm || st=1; \
	if [ $$st -eq 0 ]; then echo "lint: ok"; else echo "lint: FAILED"; fi; \
	exit $$st

format:
	clang-format -i $(LINT_C)

# --- soak ---------------------------------------------------------------------

# SOAK_SECONDS, SOAK_WORKERS, SOAK_INTERVAL, SOAK_KILL_EVERY, SOAK_SEED tune it.
soak: $(EXT)
	mkdir -p $(BUILD)/soak
	EXT=$(EXT) /usr/bin/python3 tests/python/soak.py --db $(BUILD)/soak/soak.db
