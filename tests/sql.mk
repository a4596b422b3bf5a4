# SQL test runner: tests/sqltest.c, linked against the system libsqlite3.
# Built into $(BUILD) so that `make sanitize` gets a sanitized copy that can
# load the sanitized extension (the sqlite3 shell cannot).
test-programs: $(BUILD)/sqltest

$(BUILD)/sqltest: tests/sqltest.c | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ tests/sqltest.c -lsqlite3 $(EXTRA_LDFLAGS)
