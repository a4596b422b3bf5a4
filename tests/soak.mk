# make soak: tests/stress/soak.py, mixed load from several worker processes
# on one ledger file with a worker killed every few seconds, for
# SOAK_SECONDS (default 60); throughput and memory per interval, the
# invariants checked at the end. Not part of make test (a five-second smoke
# of it is: tests/suites/71-soak.sh). SOAK_WORKERS, SOAK_INTERVAL,
# SOAK_KILL_EVERY and SOAK_SEED tune it.
.PHONY: soak
soak: $(EXT)
	mkdir -p $(BUILD)/soak
	EXT=$(EXT) /usr/bin/python3 tests/stress/soak.py --db $(BUILD)/soak/soak.db
