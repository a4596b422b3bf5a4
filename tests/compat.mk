# tests/compat.mk: builds against other SQLite libraries, included by the
# Makefile (-include tests/*.mk).
#
#   make compat     the newer SQLite of better-sqlite3 (tests/suites/60-newer-sqlite.sh):
#                   build/compat/sqlite3.o      its amalgamation, compiled once (-O1, slow)
#                   build/compat/idempotency.so the extension against its sqlite3ext.h
#                   build/compat/sqltest        tests/sqltest.c linked statically with it
#                   The amalgamation is read from tests/compat/node_modules (npm ci
#                   --ignore-scripts in tests/compat, done by the suite); nothing of it
#                   is committed. Always built in build/compat with its own flags,
#                   never sanitized (the suite runs in the plain build only).
#   $(BUILD)/static/  ext/ compiled with -DSQLITE_CORE (tests/suites/62-static.sh):
#                   libidempotency.a and its objects; static_test (C) and
#                   static_test_cxx (the same file as C++), registered with
#                   sqlite3_auto_extension against the system libsqlite3; minver,
#                   the entry point built with a test-only minimum of 9.999.999 so
#                   the refusal on a too old SQLite can be seen. Cheap, so these are
#                   test programs, built with $(ALL_CFLAGS) (sanitized in
#                   `make sanitize`).

# --- the newer SQLite ---------------------------------------------------------

COMPAT_DIR := build/compat
COMPAT_AMALG := tests/compat/node_modules/better-sqlite3/deps/sqlite3
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

.PHONY: compat
compat: $(COMPAT_DIR)/idempotency.$(SO) $(COMPAT_DIR)/sqltest

$(COMPAT_AMALG)/sqlite3.c $(COMPAT_AMALG)/sqlite3.h $(COMPAT_AMALG)/sqlite3ext.h:
	@echo "compat: $@ is missing; run: (cd tests/compat && npm ci --ignore-scripts)" >&2
	@exit 1

$(COMPAT_DIR)/sqlite3.o: $(COMPAT_AMALG)/sqlite3.c $(COMPAT_AMALG)/sqlite3.h tests/compat.mk
	@mkdir -p $(COMPAT_DIR)
	$(CC) -O1 -g0 -w -std=gnu99 $(COMPAT_SQLITE_DEFS) -I$(COMPAT_AMALG) -c -o $@ $(COMPAT_AMALG)/sqlite3.c

$(COMPAT_DIR)/idempotency.$(SO): $(EXT_SRC) $(EXT_HDR) $(COMPAT_AMALG)/sqlite3ext.h $(COMPAT_AMALG)/sqlite3.h
	@mkdir -p $(COMPAT_DIR)
	$(CC) $(COMPAT_CFLAGS) $(SOFLAGS) -o $@ $(EXT_SRC) -lm

$(COMPAT_DIR)/sqltest: tests/sqltest.c $(COMPAT_DIR)/sqlite3.o $(COMPAT_AMALG)/sqlite3.h
	$(CC) $(COMPAT_CFLAGS) -o $@ tests/sqltest.c $(COMPAT_DIR)/sqlite3.o -lpthread -ldl -lm

# --- the static build ---------------------------------------------------------

STATIC_DIR := $(BUILD)/static
STATIC_OBJ := $(patsubst ext/%.c,$(STATIC_DIR)/%.o,$(EXT_SRC))
STATIC_LIB := $(STATIC_DIR)/libidempotency.a
STATIC_LIBS := -lsqlite3 -lm $(EXTRA_LDFLAGS)

# The C++ build of static_test only where a C++ compiler is installed
# (62-static.sh skips it otherwise, saying so).
CXX_FOR_TEST ?= g++
HAVE_CXX_FOR_TEST := $(shell command -v $(CXX_FOR_TEST) 2>/dev/null)

.PHONY: test-programs static
test-programs: static
static: $(STATIC_LIB) $(STATIC_DIR)/static_test $(STATIC_DIR)/minver \
  $(if $(HAVE_CXX_FOR_TEST),$(STATIC_DIR)/static_test_cxx)

$(STATIC_DIR)/%.o: ext/%.c $(EXT_HDR)
	@mkdir -p $(STATIC_DIR)
	$(CC) $(ALL_CFLAGS) -DSQLITE_CORE -c -o $@ $<

$(STATIC_LIB): $(STATIC_OBJ)
	rm -f $@
	$(AR) rcs $@ $(STATIC_OBJ)

$(STATIC_DIR)/static_test: tests/compat/static_test.c $(STATIC_LIB) include/idempotency.h
	$(CC) $(ALL_CFLAGS) -o $@ tests/compat/static_test.c $(STATIC_LIB) $(STATIC_LIBS)

# The same program compiled as C++ (-x c++, headers included in the other
# order): include/idempotency.h must be usable from C++ next to sqlite3.h.
$(STATIC_DIR)/static_test_cxx: tests/compat/static_test.c $(STATIC_LIB) include/idempotency.h
	$(CXX_FOR_TEST) $(filter-out -std=gnu11,$(ALL_CFLAGS)) -std=c++11 -DSTATIC_TEST_HEADER_FIRST \
	  -x c++ -c -o $(STATIC_DIR)/static_test_cxx.o tests/compat/static_test.c
	$(CXX_FOR_TEST) -o $@ $(STATIC_DIR)/static_test_cxx.o $(STATIC_LIB) $(STATIC_LIBS)

# The entry point with a test-only minimum above any real SQLite; the other
# objects are the static library's.
$(STATIC_DIR)/minver-idempotency.o: ext/idempotency.c $(EXT_HDR)
	@mkdir -p $(STATIC_DIR)
	$(CC) $(ALL_CFLAGS) -DSQLITE_CORE -DIDEM_MIN_SQLITE_VERSION_NUMBER=9999999 -c -o $@ $<

$(STATIC_DIR)/minver: tests/compat/minver_test.c $(STATIC_DIR)/minver-idempotency.o $(STATIC_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ tests/compat/minver_test.c $(STATIC_DIR)/minver-idempotency.o \
	  $(filter-out $(STATIC_DIR)/idempotency.o,$(STATIC_OBJ)) $(STATIC_LIBS)
