-- sql/install-ledger.sql: a ledger and its guard for the strict
-- `operations` table (after sql/operations.sql or sql/migrate.sql).
--
-- Needs the extension loaded on the same connection first. The runner
-- loads it, so this file stays plain SQL (also usable from a binding after
-- load_extension):
--
--   sqlite3 -bail app.db -cmd '.load build/idempotency' < sql/install-ledger.sql
--
-- With -bail a failed .load stops the shell before any statement runs.
--
-- What it installs, in one transaction (all or nothing):
--
--   * ledger: CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300),
--     the claims of tool calls (docs/ledger.md); 300 s is the default
--     lease, written out so the choice is visible;
--   * a guard on operations (docs/guards.md): an INSERT into operations
--     needs a live `claimed` claim of ledger for its (tenant, operation_id),
--     so a row is written only by the holder of the claim, claim before act.
--     The key column is operation_id: the claim must have been taken with
--     that id as its key, i.e. idem_claim(..., effect, operation_id) with
--     operation_id equal to the row's. tenant, operation_id cannot be
--     updated. Rows already in the table are left alone, and the guard's
--     trigger fails closed ("no such function: idem_guard_check") on a
--     connection that has not loaded the extension.
--
-- operations_legacy and operations_quarantine (sql/migrate.sql) are archives
-- and are not guarded. Running the file twice fails (the ledger exists) and
-- changes nothing.

BEGIN IMMEDIATE;
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300);
SELECT idem_guard('ledger', 'operations', 'operation_id', 'tenant') AS guarded;
COMMIT;
