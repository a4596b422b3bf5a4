# tests/wait.mk: a claim waits for another connection's write transaction
# (tests/stress/wait.c, run by tests/suites/33-wait.sh). Built like the
# other stress programs, so `make sanitize` gets a sanitized copy.
.PHONY: test-programs
test-programs: $(BUILD)/wait

$(BUILD)/wait: tests/stress/wait.c $(STRESS_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/stress/wait.c -lsqlite3 $(EXTRA_LDFLAGS)
