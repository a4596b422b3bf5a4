-- sqltest: file
-- Defensive mode (SQLITE_DBCONFIG_DEFENSIVE): plain SQL cannot change the
-- ledger's meta and guards tables, while the ledger's own writes (nested
-- in its functions and in INSERT INTO the ledger) and the guards keep
-- working. Before SQLite 3.44 the rows, meta and guards tables are also
-- read-only shadow tables (31-defensive-rows.sql); from 3.44, which refuses
-- triggers on shadow tables, their triggers alone refuse the writes
-- (32-defensive-rows-newer.sql); tests/suites/66-defensive-files.sh tries
-- created and reopened files.
-- a fixed clock: idem_purge('L', 0) below must not depend on the millisecond
SELECT 'clock', sqltest_clock(1700000000000) = 1700000000000;
SELECT 'defensive-on', sqltest_defensive(1) = 1;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT, item TEXT);
SELECT 'guard-installs', idem_guard('L', 'orders', 'k', 'tenant') = 1;

-- plain SQL cannot write these tables (a write nested in a running
-- statement, as errmsg() makes it, would bypass the shadow tables' read-only
-- mode, never their triggers)
SELECT 'meta-refused', errcode('UPDATE L_meta SET v = 0 WHERE k = ''lease_seconds''') IN (1, 1811);
SELECT 'guards-refused', errcode('DELETE FROM L_guards') IN (1, 1811);
SELECT 'shadow-untouched', (SELECT count(*) FROM L_guards) = 1 AND (SELECT v FROM L_meta WHERE k = 'lease_seconds') = 60;

-- the ledger writes through its own paths
SELECT 'claim-admitted', json_extract(idem_claim('L', 't', 'c', 'order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'guarded-insert', errmsg('INSERT INTO orders(tenant, k, item) VALUES (''t'', ''op-1'', ''a'')') IS NULL;
SELECT 'guarded-refused', errmsg('INSERT INTO orders(tenant, k, item) VALUES (''t'', ''op-2'', ''b'')')
       = 'idem_guard: insert into "orders" refused: key "op-2" needs a live claim of ledger L; there is no claim for it';
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-1'), 'succeeded', '{"n":1}'), '$.members[0].rowid') = 1;
SELECT 'replay', json_extract(idem_claim('L', 't', 'c', 'order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'replay';
INSERT INTO L(tenant, conversation, tool, args) VALUES ('t', 'c', 'sql', '{"n":2}');
SELECT 'insert-claim', json_extract(idem_last_claim('L'), '$.attempt') = 1;
SELECT 'purge', idem_purge('L', 0) = 0;
SELECT 'rows', (SELECT count(*) FROM L) = 2;

-- the file opens again in defensive mode with the extension loaded: the
-- same file attached under another name reads its schema afresh (SQLite
-- 3.44+ would refuse a trigger on a shadow table while reading it)
ATTACH (SELECT file FROM pragma_database_list WHERE name = 'main') AS again;
SELECT 'reopen-reads', (SELECT count(*) FROM again.L) = 2;
SELECT 'reopen-claims', json_extract(idem_claim('L', 't', 'c', 'again', '{}'), '$.decision') = 'admitted';
SELECT 'reopen-replays', (SELECT status FROM again.L WHERE "key" = 'op-1') = 'succeeded';
DETACH again;

-- a trigger planted on a shadow table is still caught. Newer SQLite refuses
-- CREATE TRIGGER on a shadow table in defensive mode, so it is planted with
-- defensive mode off, as a writer of the file without it could.
SELECT 'plant-defensive-off', sqltest_defensive(0) = 0;
CREATE TRIGGER planted BEFORE INSERT ON L_rows BEGIN SELECT RAISE(IGNORE); END;
SELECT 'plant-defensive-on', sqltest_defensive(1) = 1;
SELECT 'planted-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: ledger L has a foreign trigger "planted" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'plant-remove-off', sqltest_defensive(0) = 0;
DROP TRIGGER planted;
SELECT 'plant-remove-on', sqltest_defensive(1) = 1;
SELECT 'after-drop', json_extract(idem_claim('L', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'unguard', idem_unguard('L', 'orders') = 1;
SELECT 'defensive-off', sqltest_defensive(0) = 0;
