-- Defensive mode (SQLITE_DBCONFIG_DEFENSIVE): the shadow tables are
-- read-only to plain SQL, while the ledger's own writes (nested in its
-- functions and in INSERT INTO the ledger) and the guards keep working.
-- Defensive mode does not stop CREATE TRIGGER on a shadow table: the
-- extension's foreign-trigger check does.
SELECT 'defensive-on', sqltest_defensive(1) = 1;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT, item TEXT);
SELECT 'guard-installs', idem_guard('L', 'orders', 'k', 'tenant') = 1;

-- plain SQL cannot write the shadow tables (top-level statements: a write
-- nested in a running statement, as errmsg() would make it, bypasses
-- defensive mode)
-- expect-error: table L_rows may not be modified
INSERT INTO L_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) VALUES('t','k','c','x','{}','external','claimed',1,randomblob(16),0,0,0);
-- expect-error: table L_meta may not be modified
UPDATE L_meta SET v = 0 WHERE k = 'lease_seconds';
-- expect-error: table L_guards may not be modified
DELETE FROM L_guards;
-- expect-error: table L_rows may not be modified
DELETE FROM L_rows;
SELECT 'shadow-untouched', (SELECT count(*) FROM L_guards) = 1 AND (SELECT count(*) FROM L_rows) = 0;

-- the ledger writes through its own paths
SELECT 'claim-admitted', json_extract(idem_claim('L', 't', 'c', 'order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'guarded-insert', errmsg('INSERT INTO orders(tenant, k, item) VALUES (''t'', ''op-1'', ''a'')') IS NULL;
SELECT 'guarded-refused', errmsg('INSERT INTO orders(tenant, k, item) VALUES (''t'', ''op-2'', ''b'')')
       = 'idem_guard: insert into "orders" refused: key "op-2" needs a live claim of ledger L; there is no claim for it';
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-1'), 'succeeded', '{"n":1}'), '$.members[0].rowid') = 1;
SELECT 'replay', json_extract(idem_claim('L', 't', 'c', 'order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'replay';
INSERT INTO L(tenant, conversation, tool, args) VALUES ('t', 'c', 'sql', '{"n":2}');
SELECT 'insert-claim', json_extract(idem_last_claim('L'), '$.attempt') = 1;
SELECT 'purge', idem_purge('L', 0) >= 0;
SELECT 'rows', (SELECT count(*) FROM L) = 2;
-- the shadow tables are still read-only in a transaction
BEGIN;
-- expect-error: table L_rows may not be modified
UPDATE L_rows SET status = 'failed';
COMMIT;

-- a trigger planted on a shadow table is still caught
CREATE TRIGGER planted BEFORE INSERT ON L_rows BEGIN SELECT RAISE(IGNORE); END;
SELECT 'planted-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: ledger L has a foreign trigger "planted" on its shadow tables; every ledger operation is refused until it is dropped';
DROP TRIGGER planted;
SELECT 'after-drop', json_extract(idem_claim('L', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'unguard', idem_unguard('L', 'orders') = 1;
SELECT 'defensive-off', sqltest_defensive(0) = 0;
