# Developer tools, included by the Makefile (-include tests/*.mk):
#
#   make bench      build bench/bench.c against the system libsqlite3 and
#                   run it on $(SHARED)/bench-fixtures (ratios from one run);
#                   BENCH_MAX_ROWS=5000000 adds the 5M-row growth step.
#                   The bench program is also built by `make test` (never
#                   run there: speed is not a test), so it cannot rot.
#   make valgrind   every suite with its C programs under valgrind
#                   (memory errors and definite/indirect leaks fail)
#   make lint       clang-format drift, cppcheck, a -Werror build in build/lint
#   make format     rewrite the C sources in the .clang-format style

# --- bench ------------------------------------------------------------------

BENCH_BIN := $(BUILD)/bench/bench
BENCH_CFLAGS := -O2 -g $(WARN) -std=gnu11

$(BENCH_BIN): bench/bench.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lsqlite3 -lm

.PHONY: test-programs
test-programs: $(BENCH_BIN)

bench: all $(BENCH_BIN)
	@test -d "$(SHARED)/bench-fixtures" || { \
	  echo "bench: $(SHARED)/bench-fixtures is missing (set SHARED=<dir holding bench-fixtures/>)"; \
	  exit 2; }
	@$(BENCH_BIN) $(EXT) "$(SHARED)/bench-fixtures" tests/sql/03-plain-grammar-cases.sql

# --- valgrind ---------------------------------------------------------------

# Suites run their C programs through $TEST_WRAP. Exit status 99 marks a
# valgrind finding, so a suite can tell it from the program's own failure.
VALGRIND_WRAP := valgrind --quiet --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect

valgrind: all
	@command -v valgrind >/dev/null 2>&1 || { \
	  echo "valgrind: not installed (Debian: apt-get install valgrind)"; exit 1; }
	@$(MAKE) --no-print-directory test-programs
	@TEST_WRAP="$(VALGRIND_WRAP)" bash tests/run.sh

# --- lint / format ----------------------------------------------------------

LINT_C := $(wildcard ext/*.c ext/*.h include/*.h) $(sort $(shell find tests -name node_modules -prune -o -name '*.c' -print 2>/dev/null))

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
