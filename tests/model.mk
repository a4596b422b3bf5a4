# tests/model.mk: the model-based test of the ledger's state machine, the
# I/O fault sweep and the clock-skew test, included by the Makefile.
#
#   $(BUILD)/model    a reference model vs the ledger, random sequences (tests/suites/34-model.sh)
#   $(BUILD)/faults   failed writes, failed syncs, a full disk (tests/suites/35-faults.sh)
#   $(BUILD)/skew     two connections whose clocks disagree (tests/suites/36-skew.sh)
#   make model-long   a million model steps (also run by make fuzz; MODEL_STEPS, MODEL_SEED)
#
# Built with $(ALL_CFLAGS) against the system libsqlite3, so `make sanitize`
# (BUILD=build/asan) builds sanitized copies that load the sanitized
# extension $(EXT).

MODEL_HDR := tests/faults/faultvfs.h tests/stress/stress.h
MODEL_PROGS := $(BUILD)/model

.PHONY: test-programs model-long fuzz
test-programs: $(MODEL_PROGS)

$(BUILD)/model: tests/model/model.c $(MODEL_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/stress -Itests/faults -o $@ tests/model/model.c -lsqlite3 $(EXTRA_LDFLAGS)

MODEL_STEPS ?= 1000000
model-long: all $(BUILD)/model
	@MODEL_STEPS=$(MODEL_STEPS) MODEL_SEED=$(MODEL_SEED) bash tests/model/long.sh
fuzz: model-long

test-programs: $(BUILD)/faults
$(BUILD)/faults: tests/faults/faults.c $(MODEL_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/stress -Itests/faults -o $@ tests/faults/faults.c -lsqlite3 $(EXTRA_LDFLAGS)

test-programs: $(BUILD)/skew
$(BUILD)/skew: tests/faults/skew.c $(MODEL_HDR) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itests/stress -Itests/faults -o $@ tests/faults/skew.c -lsqlite3 $(EXTRA_LDFLAGS)
