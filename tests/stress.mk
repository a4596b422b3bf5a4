# tests/stress.mk: the race, crash and allocation-failure programs of the
# ledger, included by the Makefile (-include tests/*.mk).
#
#   $(BUILD)/race    many processes claim the same keys     (tests/suites/30-race.sh)
#   $(BUILD)/crash   a claiming child is killed at random    (tests/suites/31-crash.sh)
#   $(BUILD)/oom     every allocation of every path fails    (tests/suites/32-oom.sh)
#
# Built with $(ALL_CFLAGS) against the system libsqlite3, so `make sanitize`
# (BUILD=build/asan) builds sanitized copies that load the sanitized
# extension $(EXT).

STRESS_HDR := tests/stress/stress.h
STRESS_PROGS := $(BUILD)/race $(BUILD)/crash $(BUILD)/oom

.PHONY: test-programs
test-programs: $(STRESS_PROGS)

$(BUILD)/race: tests/stress/race.c $(STRESS_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/stress/race.c -lsqlite3 $(EXTRA_LDFLAGS)

$(BUILD)/crash: tests/stress/crash.c $(STRESS_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/stress/crash.c -lsqlite3 $(EXTRA_LDFLAGS)

$(BUILD)/oom: tests/stress/oom.c $(STRESS_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/stress/oom.c -lsqlite3 $(EXTRA_LDFLAGS)
