-- A guard's triggers are checked like the ledger's own (by name and
-- stored SQL, again whenever the schema changes): a dropped or altered
-- guard trigger, or a trigger named as one that no guard lists, makes
-- every ledger operation fail naming it; the remedy the message names
-- works in that state; idem_upgrade restores what is missing.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT 'guard', idem_guard('L', 'orders', 'k', 'tenant') = 1;
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k1'), '$.decision') = 'admitted';

-- a guard trigger dropped by plain SQL is noticed at the next operation
DROP TRIGGER orders_idem_L_insert;
SELECT 'dropped-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''local'', ''k2'')')
       = 'idem_claim: ledger L is missing its guard trigger "orders_idem_L_insert" on table "orders"; rows may have been written to its guarded tables without being checked or recorded as members: find them (the rows whose key holds a claimed or unknown local claim in "L_rows" and that have no row in "L_members"), then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'dropped-select', errmsg('SELECT count(*) FROM L') GLOB 'idempotency: ledger L is missing its guard trigger "orders_idem_L_insert" on table "orders"; *';
SELECT 'dropped-settle', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''k1''), ''succeeded'', NULL)') GLOB 'idem_settle: ledger L is missing its guard trigger *';
-- the remedy named works in this state: the tables it names read without the extension's checks
SELECT 'remedy-reads', (SELECT count(*) FROM "L_rows") = 1 AND (SELECT count(*) FROM "L_members") = 0;
SELECT 'restore', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;
SELECT 'restored-works', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k2'), '$.decision') = 'admitted';
SELECT 'restored-refuses-unclaimed', errmsg('INSERT INTO orders(tenant, k) VALUES (''t'', ''nope'')')
       = 'idem_guard: insert into "orders" refused: key "nope" needs a live claim of ledger L; there is no claim for it';

-- an altered guard trigger
DROP TRIGGER orders_idem_L_member;
CREATE TRIGGER orders_idem_L_member AFTER INSERT ON orders BEGIN SELECT 1; END;
SELECT 'altered-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''local'', ''k3'')')
       = 'idem_claim: ledger L has its guard trigger "orders_idem_L_member" altered; rows may have been written to its guarded tables without being checked or recorded as members: find them (the rows whose key holds a claimed or unknown local claim in "L_rows" and that have no row in "L_members"), then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'altered-restore', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;
SELECT 'altered-restored-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_L_member') LIKE '%SELECT idem_guard_member(%';

-- a trigger named as a guard trigger that no guard lists is foreign
CREATE TABLE notes(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
CREATE TRIGGER notes_idem_L_insert BEFORE INSERT ON notes BEGIN SELECT 1; END;
SELECT 'orphan-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''local'', ''k3'')')
       = 'idem_claim: ledger L has a guard trigger "notes_idem_L_insert" that no guard of L_guards lists; every ledger operation is refused until it is dropped';
SELECT 'orphan-upgrade-refuses', errmsg('SELECT idem_upgrade(''L'')')
       = 'idem_upgrade: ledger L has a guard trigger "notes_idem_L_insert" that no guard of L_guards lists; drop it first (nothing was changed)';
DROP TRIGGER notes_idem_L_insert;
SELECT 'orphan-dropped-works', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k3'), '$.decision') = 'admitted';

-- a guarded table renamed keeps its guard, checked under its new name
ALTER TABLE orders RENAME TO orders2;
SELECT 'renamed-works', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k4'), '$.decision') = 'admitted';
INSERT INTO orders2(tenant, k) VALUES ('t', 'k4');
SELECT 'renamed-member', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'k4'), 'succeeded', NULL), '$.members')
       = '[{"table":"orders2","rowid":' || (SELECT id FROM orders2 WHERE k = 'k4') || '}]';
-- a dropped guarded table takes its triggers with it: not a gap (nothing can be written to it)
DROP TABLE orders2;
SELECT 'table-dropped-works', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k5'), '$.decision') = 'admitted';
-- but a table of the guard's name without its triggers is a gap
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT 'same-name-gap', errmsg('SELECT count(*) FROM L')
       GLOB 'idempotency: ledger L has lost the guard triggers of table "orders"; *';
-- the ledger's own tables cannot be guarded (the members table is a WITHOUT
-- ROWID table as well, and the shadow-table refusal comes first)
CREATE VIRTUAL TABLE M USING idempotency;
SELECT 'no-guard-on-members', errmsg('SELECT idem_guard(''M'', ''M_members'', ''claim'', ''guard'')')
       = 'idem_guard: "M_members" is not a rowid table that can be guarded (a shadow table of the ledger)';
SELECT 'no-guard-on-rows', errmsg('SELECT idem_guard(''M'', ''M_rows'', ''key'', ''tenant'')')
       = 'idem_guard: "M_rows" is not a rowid table that can be guarded (a shadow table of the ledger)';
