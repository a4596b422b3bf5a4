-- A guard with one of its triggers missing accepts no row: idem_guard_check
-- refuses while its guard is not whole (noticed through the schema version,
-- as every ledger operation notices its own triggers), so no row lands
-- unrecorded under a live claim for the take-over to write again; and
-- idem_guard installs no guard while one of the ledger's own triggers is
-- missing. The message names the remedy that works in that state
-- (idem_upgrade) and the rows to look for; the query that finds them is
-- docs/operating.md's, run by tests/suites/80-docs.sh.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT, tok TEXT);
SELECT 'guard', idem_guard('L', 'orders', 'k', 'tenant', 'tok') = 1;
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k1'), '$.decision') = 'admitted';
SELECT 'whole-accepted', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT token FROM L WHERE "key" = ''k1''))') IS NULL;

-- the member trigger dropped: a row under the live claim is refused, nothing written
DROP TRIGGER orders_idem_L_member;
SELECT 'member-missing-refused', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''))')
       = 'idem_guard: insert into "orders" refused: ledger L is missing its guard trigger "orders_idem_L_member" on table "orders"; rows may have been written to its guarded tables without being checked or recorded as members: find them (the rows whose key holds a claimed or unknown local claim in "L_rows" and that have no row in "L_members"), then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'member-missing-or-ignore', errmsg('INSERT OR IGNORE INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''))') IS NOT NULL;
SELECT 'member-missing-nothing-written', (SELECT count(*) FROM orders) = 1;
-- the remedy the message names works in this state, and repairs
SELECT 'remedy', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;
SELECT 'repaired-accepted', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT token FROM L WHERE "key" = ''k1''))') IS NULL;
SELECT 'repaired-members', (SELECT count(*) FROM L_members) = 2;

-- the update trigger dropped: the same
DROP TRIGGER orders_idem_L_update;
SELECT 'update-missing-refused', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''))')
       GLOB 'idem_guard: insert into "orders" refused: ledger L is missing its guard trigger "orders_idem_L_update" on table "orders"; rows may have been written *';
SELECT 'update-missing-nothing-written', (SELECT count(*) FROM orders) = 2;
SELECT 'update-remedy', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;

-- an altered member trigger: the same
DROP TRIGGER orders_idem_L_member;
CREATE TRIGGER orders_idem_L_member AFTER INSERT ON orders BEGIN SELECT 1; END;
SELECT 'altered-refused', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''))')
       GLOB 'idem_guard: insert into "orders" refused: ledger L has its guard trigger "orders_idem_L_member" altered; rows may have been written *';
SELECT 'altered-nothing-written', (SELECT count(*) FROM orders) = 2;
SELECT 'altered-remedy', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;

-- inside a transaction (the recipe): the check sees a trigger dropped in it
BEGIN IMMEDIATE;
SELECT 'txn-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":2}', 'local', 'k2'), '$.decision') = 'admitted';
DROP TRIGGER orders_idem_L_member;
SELECT 'txn-refused', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k2'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k2''))')
       GLOB 'idem_guard: insert into "orders" refused: ledger L is missing its guard trigger "orders_idem_L_member" *';
ROLLBACK;
SELECT 'txn-rolled-back', (SELECT count(*) FROM sqlite_schema WHERE name = 'orders_idem_L_member') = 1
   AND (SELECT count(*) FROM orders) = 2;

-- a ledger missing one of its own triggers takes no new guard
CREATE TABLE lines(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
DROP TRIGGER L_rows_update;
SELECT 'guard-refused', errmsg('SELECT idem_guard(''L'', ''lines'', ''k'', ''tenant'')')
       = 'idem_guard: ledger L is missing its trigger "L_rows_update"; rows may have been changed without it: check them (SELECT * FROM "L_rows") against what the application and the targets know, then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'guard-refused-nothing-installed', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'lines') = 0
   AND (SELECT count(*) FROM L_guards WHERE tbl = 'lines') = 0;
-- a guarded insert is refused in that state too
SELECT 'own-missing-insert-refused', errmsg('INSERT INTO orders(tenant, k, tok) VALUES (''t'', ''k1'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''))')
       GLOB 'idem_guard: insert into "orders" refused: ledger L is missing its trigger "L_rows_update"; *';
SELECT 'own-remedy', json_extract(idem_upgrade('L'), '$.triggers_created') = 1;
SELECT 'guard-after-remedy', idem_guard('L', 'lines', 'k', 'tenant') = 1;
