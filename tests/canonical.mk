# tests/canonical.mk: test programs of the pure helpers (canonical.c,
# grammar.c) linked without SQLite, included by the Makefile.
#
#   $(BUILD)/test_canonical   unit tests of the canonicaliser  (tests/suites/10-unit.sh)
#   $(BUILD)/test_grammar     unit tests of the key grammar     (tests/suites/10-unit.sh)
#   $(BUILD)/test_jcs         RFC 8785 vectors in $(SHARED)/conformance/jcs (11-jcs.sh)
#   $(BUILD)/jcs_cli          framed stdin -> canonical stdout, for the npm diff (12-diff.sh)
#   $(BUILD)/num_cli          number requests -> answers, for the Node diff (14-numbers.sh)
#   make fuzz [FUZZ_SECONDS=60]   libFuzzer targets in tests/fuzz/ (13-fuzz.sh)
#
# Built with $(ALL_CFLAGS), so `make sanitize` (BUILD=build/asan) builds
# sanitized copies next to the sanitized extension.

PURE_TEST_HDR := ext/idem_internal.h tests/unit/check.h
PURE_TEST_PROGS := $(BUILD)/test_canonical $(BUILD)/test_grammar $(BUILD)/test_jcs $(BUILD)/jcs_cli \
  $(BUILD)/num_cli

.PHONY: test-programs fuzz
test-programs: $(PURE_TEST_PROGS)

$(BUILD)/test_canonical: tests/unit/test_canonical.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ tests/unit/test_canonical.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/test_grammar: tests/unit/test_grammar.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ tests/unit/test_grammar.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/test_jcs: tests/jcs/test_jcs.c $(PURE_SRC) $(PURE_TEST_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ tests/jcs/test_jcs.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/jcs_cli: tests/diff/jcs_cli.c $(PURE_SRC) ext/idem_internal.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/diff/jcs_cli.c $(PURE_SRC) $(LDLIBS_EXT)

$(BUILD)/num_cli: tests/diff/num_cli.c $(PURE_SRC) ext/idem_internal.h | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/diff/num_cli.c $(PURE_SRC) $(LDLIBS_EXT)

# The fuzz suite builds its targets with clang (-fsanitize=fuzzer) into
# $(BUILD)/fuzz and runs each for FUZZ_SECONDS (default 15 in the suite).
FUZZ_SECONDS ?= 15
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/suites/13-fuzz.sh
